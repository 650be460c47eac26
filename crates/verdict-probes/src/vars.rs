//! `{{name}}` substitution in every string of a spec: values and the keys of objects (an
//! `env` or `headers` map's names are strings of the spec too).
//!
//! Substitution happens on parsed values, never on the file's text, so a variable can change a
//! string but never the structure of the spec: a key can be renamed, never split or nested, and
//! two keys of one object that substitution makes equal are an error rather than one silently
//! replacing the other. A reference is `{{`, optional spaces, a name
//! (`[A-Za-z_][A-Za-z0-9_.-]*`), optional spaces and `}}`; a reference to an undefined name is an
//! error. Any other `{{` is left as written. Substituted text is not scanned again.

use crate::positions::token;
use serde_json::Value;
use std::collections::BTreeMap;

/// What substitution refused, at a JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VarError {
    /// A reference to a variable nobody defined.
    #[error("undefined variable {name:?}")]
    Undefined {
        /// The name.
        name: String,
        /// Where the string that refers to it is (a key's member, for a key).
        pointer: String,
    },
    /// Two keys of one object that are the same once substituted.
    #[error("key {key:?} is there twice once its variables are substituted")]
    KeyTwice {
        /// The key, substituted.
        key: String,
        /// The member whose key became a repeat.
        pointer: String,
    },
}

impl VarError {
    /// Where the refused string is.
    #[must_use]
    pub fn pointer(&self) -> &str {
        match self {
            Self::Undefined { pointer, .. } | Self::KeyTwice { pointer, .. } => pointer,
        }
    }
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

/// Substitutes in every string value and object key under `value`.
pub fn substitute(
    value: &mut Value,
    vars: &BTreeMap<String, String>,
    pointer: &str,
) -> Result<(), VarError> {
    let undefined = |at: &str| {
        let at = at.to_owned();
        move |name| VarError::Undefined { name, pointer: at }
    };
    match value {
        Value::String(s) => {
            if s.contains("{{") {
                *s = substitute_str(s, vars).map_err(undefined(pointer))?;
            }
            Ok(())
        }
        Value::Object(map) if map.keys().any(|k| k.contains("{{")) => {
            // Rebuilt member by member; a problem is located at the key as written.
            for (k, mut v) in std::mem::take(map) {
                let at = format!("{pointer}/{}", token(&k));
                let key = if k.contains("{{") {
                    substitute_str(&k, vars).map_err(undefined(&at))?
                } else {
                    k
                };
                substitute(&mut v, vars, &at)?;
                if map.contains_key(&key) {
                    return Err(VarError::KeyTwice { key, pointer: at });
                }
                map.insert(key, v);
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
        assert_eq!(
            e,
            VarError::Undefined {
                name: "nss".into(),
                pointer: "/probe/argv/2".into()
            }
        );
        let mut doc = json!({"env": {"{{nss}}": "1"}});
        let e = substitute(&mut doc, &vars(), "").unwrap_err();
        assert_eq!(e.pointer(), "/env/{{nss}}");
        assert_eq!(e.to_string(), "undefined variable \"nss\"");
    }

    #[test]
    fn keys_are_substituted_and_two_that_become_one_are_refused() {
        let mut doc = json!({"env": {"NS_{{ns}}": "{{ns}}", "PORT": "{{port}}"}});
        substitute(&mut doc, &vars(), "").unwrap();
        assert_eq!(doc, json!({"env": {"NS_shop": "shop", "PORT": "8080"}}));
        let mut doc = json!({"env": {"{{ns}}": "a", "shop": "b"}});
        let e = substitute(&mut doc, &vars(), "").unwrap_err();
        assert!(
            matches!(&e, VarError::KeyTwice { key, .. } if key == "shop"),
            "{e:?}"
        );
    }
}
