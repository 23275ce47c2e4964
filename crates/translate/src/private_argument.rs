//! Removing a private argument (one the gateway adds to calls it delivers, e.g. Switchyard's
//! call identity) from a guest request before it is translated, so the model never sees it:
//! not in any function declaration's schema, not in the arguments of any call in the history.

use serde_json::Value;

use crate::google::GenerateContentRequest;

/// Removes `name` from every declared schema's `properties`/`required` and from every
/// `functionCall.args` of `request`; returns how many places held it.
pub fn strip_private_argument(request: &mut GenerateContentRequest, name: &str) -> usize {
    let mut removed = 0;
    for tool in request.tools.iter_mut().flatten() {
        for declaration in tool.function_declarations.iter_mut().flatten() {
            for schema in [
                &mut declaration.parameters_json_schema,
                &mut declaration.parameters,
            ]
            .into_iter()
            .flatten()
            {
                removed += strip_from_schema(schema, name);
            }
        }
    }
    for content in &mut request.contents {
        for part in &mut content.parts {
            if let Some(Value::Object(args)) =
                part.function_call.as_mut().and_then(|c| c.args.as_mut())
                && args.remove(name).is_some()
            {
                removed += 1;
            }
        }
    }
    removed
}

pub(crate) fn strip_from_schema(schema: &mut Value, name: &str) -> usize {
    let Some(object) = schema.as_object_mut() else {
        return 0;
    };
    let mut removed = 0;
    if let Some(Value::Object(properties)) = object.get_mut("properties")
        && properties.remove(name).is_some()
    {
        removed += 1;
    }
    if let Some(Value::Array(required)) = object.get_mut("required") {
        required.retain(|r| r.as_str() != Some(name));
    }
    removed
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_argument_leaves_schemas_and_history_and_nothing_else_changes() {
        let mut request: GenerateContentRequest = serde_json::from_value(json!({
            "contents": [
                {"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "mcp_sy_record",
                    "args": {"nonce": "n", "_p": "secret"}}}]},
                {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "mcp_sy_record",
                    "response": {"output": "ok"}}}]}
            ],
            "tools": [{"functionDeclarations": [
                {"name": "mcp_sy_record", "parametersJsonSchema": {"type": "object",
                    "properties": {"nonce": {"type": "string"}, "_p": {"type": "string"}},
                    "required": ["nonce", "_p"]}},
                {"name": "read_file", "parametersJsonSchema": {"type": "object",
                    "properties": {"path": {"type": "string"}}}}
            ]}]
        }))
        .unwrap();
        let untouched_tool = request.tools.as_ref().unwrap()[0]
            .function_declarations
            .as_ref()
            .unwrap()[1]
            .clone();
        assert_eq!(strip_private_argument(&mut request, "_p"), 2);
        let value = serde_json::to_value(&request).unwrap();
        assert_eq!(
            value["contents"][1]["parts"][0]["functionCall"]["args"],
            json!({"nonce": "n"})
        );
        let declared = &value["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"];
        assert_eq!(declared["properties"], json!({"nonce": {"type": "string"}}));
        assert_eq!(declared["required"], json!(["nonce"]));
        assert_eq!(
            request.tools.as_ref().unwrap()[0]
                .function_declarations
                .as_ref()
                .unwrap()[1],
            untouched_tool
        );
        assert_eq!(strip_private_argument(&mut request, "_p"), 0);
    }
}
