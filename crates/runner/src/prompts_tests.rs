use super::*;

#[test]
fn a_stdin_prompt_line_is_a_string_or_an_object_with_a_prompt() {
    assert_eq!(parse_prompt_line("\"next\"\n").as_deref(), Some("next"));
    assert_eq!(
        parse_prompt_line(r#"{"prompt": "go on", "x": 1}"#).as_deref(),
        Some("go on")
    );
    for bad in [
        "plain text",
        "{\"text\": \"x\"}",
        "\"  \"",
        "3",
        "{\"prompt\": 3}",
    ] {
        assert_eq!(parse_prompt_line(bad), None, "{bad}");
    }
}
