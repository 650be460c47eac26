//! `{{name}}` substitution in every string value of a spec.
//!
//! Substitution happens on parsed values, never on the file's text, so a variable can change a
//! string but never the structure of the spec. A reference is `{{`, optional spaces, a name
//! (`[A-Za-z_][A-Za-z0-9_.-]*`), optional spaces and `}}`; a reference to an undefined name is an
//! error. Any other `{{` is left as written. Substituted text is not scanned again.

use crate::positions::token;
use serde_json::Value;
use std::collections::BTreeMap;

/// A reference to a variable nobody defined, at a JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("undefined variable {name:?}")]
pub struct UndefinedVar {
    /// The name.
    pub name: String,
    /// Where the string that refers to it is.
    pub pointer: String,
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Substitutes the references in one string.
pub fn substitute_str(s: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        let after_open = from.get(2..).unwrap_or("");
        match after_open.find("}}") {
            Some(end) => {
                let inner = after_open.get(..end).unwrap_or("");
                let name = inner.trim_matches(' ');
                if is_name(name) {
                    let v = vars.get(name).ok_or_else(|| name.to_owned())?;
                    out.push_str(v);
                    rest = after_open.get(end + 2..).unwrap_or("");
                } else {
                    out.push_str("{{");
                    rest = after_open;
                }
            }
            None => {
                out.push_str(from);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Substitutes in every string value (not in object keys) under `value`.
pub fn substitute(
    value: &mut Value,
    vars: &BTreeMap<String, String>,
    pointer: &str,
) -> Result<(), UndefinedVar> {
    match value {
        Value::String(s) => {
            if s.contains("{{") {
                *s = substitute_str(s, vars).map_err(|name| UndefinedVar {
                    name,
                    pointer: pointer.to_owned(),
                })?;
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                substitute(item, vars, &format!("{pointer}/{i}"))?;
            }
            Ok(())
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                substitute(v, vars, &format!("{pointer}/{}", token(k)))?;
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars() -> BTreeMap<String, String> {
        BTreeMap::from([("ns".into(), "shop".into()), ("port".into(), "8080".into())])
    }

    #[test]
    fn substitutes_names_with_optional_spaces() {
        assert_eq!(
            substitute_str("-n {{ns}} :{{ port }}", &vars()).unwrap(),
            "-n shop :8080"
        );
        assert_eq!(substitute_str("no refs", &vars()).unwrap(), "no refs");
    }

    #[test]
    fn leaves_non_references_alone_and_does_not_rescan() {
        assert_eq!(
            substitute_str("{{ 1 + 2 }} {{", &vars()).unwrap(),
            "{{ 1 + 2 }} {{"
        );
        let v = BTreeMap::from([("a".into(), "{{b}}".into()), ("b".into(), "x".into())]);
        assert_eq!(substitute_str("{{a}}", &v).unwrap(), "{{b}}");
    }

    #[test]
    fn undefined_names_are_errors_with_their_pointer() {
        let mut doc = json!({"probe": {"argv": ["kubectl", "-n", "{{nss}}"]}});
        let e = substitute(&mut doc, &vars(), "").unwrap_err();
        assert_eq!(e.name, "nss");
        assert_eq!(e.pointer, "/probe/argv/2");
    }

    #[test]
    fn keys_are_not_substituted() {
        let mut doc = json!({"{{ns}}": "{{ns}}"});
        substitute(&mut doc, &vars(), "").unwrap();
        assert_eq!(doc, json!({"{{ns}}": "shop"}));
    }
}
