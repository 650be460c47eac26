"""Checks a verdict attestation file with implementations that share no code with verdict.

Usage: verify_envelopes.py FILE PUBLIC_KEY_HEX

Every line must be a DSSE envelope that securesystemslib verifies with the ed25519 key, whose
payload is an in-toto Statement v1 that in-toto-attestation accepts, and whose predicate parses
as the SLSA verification summary v1 or in-toto test-result message of in-toto-attestation.
Prints "verified N" and exits 0, or names the first failure and exits 1.
"""

import hashlib
import json
import sys

from google.protobuf import json_format
from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
from in_toto_attestation.predicates.vsa.v1 import vsa_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

EXTENSION_BASE = "https://example.invalid/verdict/attestation/"

PREDICATES = {
    "https://slsa.dev/verification_summary/v1": vsa_pb2.VerificationSummary,
    "https://in-toto.io/attestation/test-result/v0.1": test_result_pb2.TestResult,
}


def vsa_proto_view(predicate):
    """The summary as in-toto-attestation 0.9's message can read it.

    That release predates two fixes to its proto that the published SLSA v1 schema already has:
    `verifiedLevels` is a list of strings, and `verifier.version` maps components to versions.
    Both are checked here by hand; every other field goes through the message strictly.
    """
    levels = predicate.get("verifiedLevels")
    if not isinstance(levels, list) or not all(isinstance(x, str) for x in levels):
        raise ValueError("verifiedLevels is not a list of strings")
    verifier = dict(predicate.get("verifier", {}))
    version = verifier.pop("version", {})
    if not isinstance(version, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in version.items()
    ):
        raise ValueError("verifier.version is not a map of strings")
    view = dict(predicate, verifier=verifier)
    field = vsa_pb2.VerificationSummary.DESCRIPTOR.fields_by_name["verified_levels"]
    if field.is_repeated:
        view["verifiedLevels"] = levels
    else:
        del view["verifiedLevels"]
    return view


def main(path, public_hex):
    keyid = hashlib.sha256(bytes.fromhex(public_hex)).hexdigest()
    key = SSlibKey(keyid, "ed25519", "ed25519", {"public": public_hex})
    count = 0
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            envelope = Envelope.from_dict(json.loads(line))
            try:
                envelope.verify([key], 1)
            except Exception as error:  # report which line, whatever the library raised
                print(f"line {number}: signature: {error}")
                return 1
            if envelope.payload_type != "application/vnd.in-toto+json":
                print(f"line {number}: payload type {envelope.payload_type}")
                return 1
            proto = json_format.Parse(envelope.payload, statement_pb2.Statement())
            Statement.copy_from_pb(proto).validate()
            predicate = json.loads(envelope.payload)["predicate"]
            message = PREDICATES.get(proto.predicate_type)
            if message is None:
                print(f"line {number}: predicate type {proto.predicate_type}")
                return 1
            # verdict's namespaced extension field is the one field the schema does not know;
            # everything else must parse strictly.
            standard = {k: v for k, v in predicate.items() if not k.startswith(EXTENSION_BASE)}
            if len(standard) != len(predicate) - 1:
                print(f"line {number}: expected exactly one verdict extension field")
                return 1
            if message is vsa_pb2.VerificationSummary:
                standard = vsa_proto_view(standard)
            json_format.ParseDict(standard, message())
            count += 1
    print(f"verified {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
