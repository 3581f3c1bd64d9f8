//! A minimal JSON value and pretty printer for `devipc doctor --json`.
//!
//! The doctor's report is small and its shape is fixed, so it is built as a [`Json`]
//! tree and printed here rather than pulling a serialisation framework into the `devipc`
//! package (whose dependencies every library user would build). Output is RFC 8259 JSON:
//! strings are escaped completely (quotes, backslashes and every control character),
//! non-finite numbers become `null`, and objects keep their insertion order.

use std::fmt::Write as _;

/// A JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i128),
    /// A floating-point number (non-finite values print as `null`).
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, in insertion order.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// An object from `(key, value)` pairs.
    pub fn obj<K: Into<String>>(pairs: impl IntoIterator<Item = (K, Json)>) -> Json {
        Json::Obj(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// `Some(v)` as `f(v)`, `None` as `null`.
    pub fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> Json) -> Json {
        v.map_or(Json::Null, f)
    }

    /// The value pretty-printed with two-space indentation and a final newline.
    pub fn pretty(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out.push('\n');
        out
    }

    fn write(&self, out: &mut String, indent: usize) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Json::Float(f) if f.is_finite() => {
                // `{:?}` keeps a `.0` on integral values and never uses exponents that
                // JSON lacks (Rust prints e.g. `1e-7` as `1e-7`, which JSON accepts).
                let _ = write!(out, "{f:?}");
            }
            Json::Float(_) => out.push_str("null"),
            Json::Str(s) => write_str(out, s),
            Json::Arr(items) if items.is_empty() => out.push_str("[]"),
            Json::Arr(items) => {
                // Arrays of scalars stay on one line (peer matrices read better).
                if items
                    .iter()
                    .all(|i| !matches!(i, Json::Arr(_) | Json::Obj(_)))
                {
                    out.push('[');
                    for (n, item) in items.iter().enumerate() {
                        if n > 0 {
                            out.push_str(", ");
                        }
                        item.write(out, indent);
                    }
                    out.push(']');
                    return;
                }
                out.push_str("[\n");
                for (n, item) in items.iter().enumerate() {
                    pad(out, indent + 1);
                    item.write(out, indent + 1);
                    out.push_str(if n + 1 < items.len() { ",\n" } else { "\n" });
                }
                pad(out, indent);
                out.push(']');
            }
            Json::Obj(pairs) if pairs.is_empty() => out.push_str("{}"),
            Json::Obj(pairs) => {
                out.push_str("{\n");
                for (n, (key, value)) in pairs.iter().enumerate() {
                    pad(out, indent + 1);
                    write_str(out, key);
                    out.push_str(": ");
                    value.write(out, indent + 1);
                    out.push_str(if n + 1 < pairs.len() { ",\n" } else { "\n" });
                }
                pad(out, indent);
                out.push('}');
            }
        }
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Json {
        Json::Bool(b)
    }
}

impl From<u32> for Json {
    fn from(v: u32) -> Json {
        Json::Int(v.into())
    }
}

impl From<u64> for Json {
    fn from(v: u64) -> Json {
        Json::Int(v.into())
    }
}

impl From<i32> for Json {
    fn from(v: i32) -> Json {
        Json::Int(v.into())
    }
}

impl From<usize> for Json {
    fn from(v: usize) -> Json {
        Json::Int(v as i128)
    }
}

impl From<f64> for Json {
    fn from(v: f64) -> Json {
        Json::Float(v)
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::Str(s.to_owned())
    }
}

impl From<String> for Json {
    fn from(s: String) -> Json {
        Json::Str(s)
    }
}

fn pad(out: &mut String, indent: usize) {
    for _ in 0..indent {
        out.push_str("  ");
    }
}

/// Writes `s` as a JSON string literal.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_strings_and_prints_scalars() {
        let v = Json::obj([
            ("s", Json::str("a\"b\\c\nd\u{1}é")),
            ("n", Json::Null),
            ("t", true.into()),
            ("i", Json::Int(-3)),
            ("f", 1.5f64.into()),
            ("g", 2.0f64.into()),
            ("nan", f64::NAN.into()),
            ("row", Json::Arr(vec![Json::Null, true.into()])),
            ("empty", Json::Arr(vec![])),
            ("o", Json::obj::<&str>([])),
        ]);
        assert_eq!(
            v.pretty(),
            "{\n  \"s\": \"a\\\"b\\\\c\\nd\\u0001é\",\n  \"n\": null,\n  \"t\": true,\n  \
             \"i\": -3,\n  \"f\": 1.5,\n  \"g\": 2.0,\n  \"nan\": null,\n  \
             \"row\": [null, true],\n  \"empty\": [],\n  \"o\": {}\n}\n"
        );
    }

    #[test]
    fn nests_objects_in_arrays() {
        let v = Json::Arr(vec![Json::obj([("a", Json::Int(1))])]);
        assert_eq!(v.pretty(), "[\n  {\n    \"a\": 1\n  }\n]\n");
    }
}
