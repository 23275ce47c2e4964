//! Tool and response schema cleaning: Google / MCP JSON Schemas -> what Chat Completions providers
//! (OpenAI, vLLM, llama.cpp grammar compiler, Ollama) accept.
//!
//! Rules, applied recursively through `properties`, `items`, `anyOf`/`oneOf`/`allOf`,
//! `additionalProperties` and `$defs`:
//! * `type` names are lower-cased (`STRING` -> `string`, also inside type arrays);
//!   `TYPE_UNSPECIFIED` is removed.
//! * `nullable: true` -> `type: [T, "null"]` (or a `{"type":"null"}` branch added to `anyOf`, and
//!   `null` added to `enum`); `nullable: false` is just removed.
//! * `format: "enum"` (a Google-only marker) is removed; other formats are kept.
//! * Local `$ref`s to `#/$defs/<name>` or `#/definitions/<name>` are inlined (sibling keys override).
//!   A `$ref` that is remote, missing or recursive is kept unchanged and reported in
//!   [`CleanedSchema::unresolved_refs`]; the `$defs`/`definitions` are then kept too.
//! * Every key not in [`ALLOWED_SCHEMA_KEYS`] is removed (`$schema`, `$id`, `$comment`,
//!   `propertyOrdering`, `examples`, `readOnly`, vendor `x-*` keys, ...) and reported by JSON pointer.
//!
//! The input is never modified: the caller keeps the original for records.

use serde_json::{Map, Value};

/// Keys kept in a cleaned schema (besides `$ref`/`$defs`/`definitions`, handled specially).
pub const ALLOWED_SCHEMA_KEYS: &[&str] = &[
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "const",
    "description",
    "title",
    "anyOf",
    "oneOf",
    "allOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "additionalProperties",
    "default",
];

/// Result of [`clean_schema`].
#[derive(Debug, Clone, PartialEq)]
pub struct CleanedSchema {
    /// The cleaned schema to send upstream.
    pub schema: Value,
    /// JSON pointers (into the original) of removed keys.
    pub dropped_keys: Vec<String>,
    /// `$ref` values kept because they could not be inlined.
    pub unresolved_refs: Vec<String>,
    /// Count of type-name lower-casings, `nullable` rewrites and inlined refs.
    pub rewrites: u32,
}

/// Cleans a schema (see the module docs for the rules).
pub fn clean_schema(schema: &Value) -> CleanedSchema {
    let mut cleaner = Cleaner {
        root: schema,
        dropped: Vec::new(),
        unresolved: Vec::new(),
        rewrites: 0,
        ref_stack: Vec::new(),
    };
    let mut out = cleaner.clean(schema, "");
    if !cleaner.unresolved.is_empty()
        && let (Some(out_obj), Some(root_obj)) = (out.as_object_mut(), schema.as_object())
    {
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(defs)) = root_obj.get(key) {
                let mut cleaned = Map::new();
                for (name, def) in defs {
                    let ptr = format!("/{key}/{}", escape_pointer(name));
                    cleaned.insert(name.clone(), cleaner.clean(def, &ptr));
                }
                out_obj.insert(key.to_string(), Value::Object(cleaned));
            }
        }
    }
    CleanedSchema {
        schema: out,
        dropped_keys: cleaner.dropped,
        unresolved_refs: cleaner.unresolved,
        rewrites: cleaner.rewrites,
    }
}

fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

struct Cleaner<'a> {
    root: &'a Value,
    dropped: Vec<String>,
    unresolved: Vec<String>,
    rewrites: u32,
    ref_stack: Vec<String>,
}

impl Cleaner<'_> {
    fn resolve_local(&self, reference: &str) -> Option<&Value> {
        let rest = reference.strip_prefix("#/")?;
        let (container, name) = rest.split_once('/')?;
        if container != "$defs" && container != "definitions" {
            return None;
        }
        let name = name.replace("~1", "/").replace("~0", "~");
        self.root.get(container)?.get(name.as_str())
    }

    fn clean(&mut self, value: &Value, ptr: &str) -> Value {
        let Some(obj) = value.as_object() else {
            return value.clone();
        };
        // Inline a local $ref (with sibling keys overriding the referenced schema).
        if let Some(Value::String(reference)) = obj.get("$ref") {
            let resolved = if self.ref_stack.contains(reference) {
                None
            } else {
                self.resolve_local(reference).cloned()
            };
            match resolved {
                Some(target) => {
                    self.ref_stack.push(reference.clone());
                    let mut inlined = self.clean(&target, ptr);
                    self.ref_stack.pop();
                    self.rewrites += 1;
                    let mut siblings = obj.clone();
                    siblings.remove("$ref");
                    let siblings = self.clean(&Value::Object(siblings), ptr);
                    if let (Some(base), Value::Object(over)) = (inlined.as_object_mut(), siblings) {
                        for (k, v) in over {
                            base.insert(k, v);
                        }
                    }
                    return inlined;
                }
                None => {
                    if !self.unresolved.contains(reference) {
                        self.unresolved.push(reference.clone());
                    }
                }
            }
        }

        let nullable = obj.get("nullable").and_then(Value::as_bool) == Some(true);
        let mut out = Map::new();
        for (key, val) in obj {
            let child = format!("{ptr}/{}", escape_pointer(key));
            match key.as_str() {
                "$ref" => {
                    // Only reached when unresolved (resolved refs returned above).
                    out.insert(key.clone(), val.clone());
                }
                "nullable" => {}
                "$defs" | "definitions" => {
                    // Dropped: refs are inlined; re-added at the root when some stay unresolved.
                }
                "type" => {
                    if let Some(t) = self.clean_type(val) {
                        out.insert(key.clone(), t);
                    }
                }
                "format" if val.as_str() == Some("enum") => self.dropped.push(child),
                "properties" => {
                    let mut props = Map::new();
                    if let Some(p) = val.as_object() {
                        for (name, sub) in p {
                            let sub_ptr = format!("{child}/{}", escape_pointer(name));
                            props.insert(name.clone(), self.clean(sub, &sub_ptr));
                        }
                    }
                    out.insert(key.clone(), Value::Object(props));
                }
                "items" | "additionalProperties" => {
                    let cleaned = match val {
                        Value::Array(list) => Value::Array(
                            list.iter()
                                .enumerate()
                                .map(|(i, s)| self.clean(s, &format!("{child}/{i}")))
                                .collect(),
                        ),
                        other => self.clean(other, &child),
                    };
                    out.insert(key.clone(), cleaned);
                }
                "anyOf" | "oneOf" | "allOf" => {
                    let list = val
                        .as_array()
                        .map(|l| {
                            l.iter()
                                .enumerate()
                                .map(|(i, s)| self.clean(s, &format!("{child}/{i}")))
                                .collect()
                        })
                        .unwrap_or_default();
                    out.insert(key.clone(), Value::Array(list));
                }
                k if ALLOWED_SCHEMA_KEYS.contains(&k) => {
                    out.insert(key.clone(), val.clone());
                }
                _ => self.dropped.push(child),
            }
        }
        if nullable {
            self.rewrites += 1;
            make_nullable(&mut out);
        }
        Value::Object(out)
    }

    fn clean_type(&mut self, val: &Value) -> Option<Value> {
        match val {
            Value::String(s) => {
                let lower = s.to_ascii_lowercase();
                if lower == "type_unspecified" {
                    self.rewrites += 1;
                    return None;
                }
                if &lower != s {
                    self.rewrites += 1;
                }
                Some(Value::String(lower))
            }
            Value::Array(list) => Some(Value::Array(
                list.iter()
                    .filter_map(|t| self.clean_type(t))
                    .collect::<Vec<_>>(),
            )),
            other => Some(other.clone()),
        }
    }
}

fn make_nullable(out: &mut Map<String, Value>) {
    let null = Value::String("null".into());
    match out.get_mut("type") {
        Some(Value::String(t)) if t != "null" => {
            let t = std::mem::take(t);
            out.insert("type".into(), Value::Array(vec![Value::String(t), null]));
        }
        Some(Value::Array(list)) if !list.contains(&null) => list.push(null),
        Some(_) => {}
        None => {
            if let Some(Value::Array(branches)) = out.get_mut("anyOf") {
                let null_branch = serde_json::json!({"type": "null"});
                if !branches.contains(&null_branch) {
                    branches.push(null_branch);
                }
            }
        }
    }
    if let Some(Value::Array(values)) = out.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upper_case_types_are_lowered_everywhere() {
        let cleaned = clean_schema(&json!({
            "type": "OBJECT",
            "properties": {
                "a": {"type": "STRING"},
                "b": {"type": "ARRAY", "items": {"type": "INTEGER"}},
                "c": {"anyOf": [{"type": "NUMBER"}, {"type": "BOOLEAN"}]}
            }
        }));
        assert_eq!(
            cleaned.schema,
            json!({
                "type": "object",
                "properties": {
                    "a": {"type": "string"},
                    "b": {"type": "array", "items": {"type": "integer"}},
                    "c": {"anyOf": [{"type": "number"}, {"type": "boolean"}]}
                }
            })
        );
        assert_eq!(cleaned.rewrites, 6);
    }

    #[test]
    fn nullable_becomes_type_union_enum_and_anyof_branch() {
        let cleaned = clean_schema(&json!({
            "type": "object",
            "properties": {
                "s": {"type": "STRING", "nullable": true},
                "e": {"type": "string", "enum": ["a", "b"], "nullable": true},
                "u": {"anyOf": [{"type": "string"}], "nullable": true},
                "n": {"type": "integer", "nullable": false}
            }
        }));
        let props = &cleaned.schema["properties"];
        assert_eq!(props["s"], json!({"type": ["string", "null"]}));
        assert_eq!(
            props["e"],
            json!({"type": ["string", "null"], "enum": ["a", "b", null]})
        );
        assert_eq!(
            props["u"],
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
        );
        assert_eq!(props["n"], json!({"type": "integer"}));
    }

    #[test]
    fn vendor_keys_are_dropped_and_reported_but_property_names_are_not_keywords() {
        let cleaned = clean_schema(&json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "propertyOrdering": ["format", "x-extra"],
            "properties": {
                "format": {"type": "string", "format": "enum", "enum": ["x"]},
                "x-extra": {"type": "string", "examples": ["e"], "minLength": 1}
            },
            "required": ["format"],
            "additionalProperties": false
        }));
        assert_eq!(
            cleaned.schema,
            json!({
                "type": "object",
                "properties": {
                    "format": {"type": "string", "enum": ["x"]},
                    "x-extra": {"type": "string", "minLength": 1}
                },
                "required": ["format"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            cleaned.dropped_keys,
            vec![
                "/$schema",
                "/propertyOrdering",
                "/properties/format/format",
                "/properties/x-extra/examples"
            ]
        );
    }

    #[test]
    fn local_refs_are_inlined_and_recursive_refs_kept() {
        let cleaned = clean_schema(&json!({
            "type": "object",
            "properties": {
                "p": {"$ref": "#/$defs/Point", "description": "where"},
                "tree": {"$ref": "#/definitions/Node"}
            },
            "$defs": {"Point": {"type": "OBJECT", "properties": {"x": {"type": "NUMBER"}}}},
            "definitions": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/definitions/Node"}}}}
        }));
        assert_eq!(
            cleaned.schema["properties"]["p"],
            json!({"type": "object", "properties": {"x": {"type": "number"}}, "description": "where"})
        );
        // Node is recursive: the inner reference stays, and the definitions are kept for it.
        assert_eq!(cleaned.unresolved_refs, vec!["#/definitions/Node"]);
        assert_eq!(
            cleaned.schema["properties"]["tree"]["properties"]["child"],
            json!({"$ref": "#/definitions/Node"})
        );
        assert!(cleaned.schema["definitions"]["Node"].is_object());
    }

    #[test]
    fn remote_ref_is_kept_and_reported() {
        let cleaned = clean_schema(&json!({"$ref": "https://example.com/s.json"}));
        assert_eq!(
            cleaned.schema,
            json!({"$ref": "https://example.com/s.json"})
        );
        assert_eq!(cleaned.unresolved_refs, vec!["https://example.com/s.json"]);
    }
}
