//! JSON values compared as values (pure): numbers by their exact decimal value, so `1`, `1.0`
//! and `1e0` are the same number, while two numbers that differ anywhere (a big integer a guest
//! rounded through a double, say) are not.
//!
//! A guest re-encodes the arguments it received before it calls back (Gemini CLI and OpenCode
//! are JavaScript: `1.0` comes back as `1`), so byte or `serde_json::Value` equality would
//! refuse the call the model really made.

use serde_json::{Number, Value};

/// `a` and `b` are the same JSON value: same shape, same strings and booleans, object keys in
/// any order, numbers equal by exact value.
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => same_number(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, x)| y.get(key).is_some_and(|y| same_value(x, y)))
        }
        _ => false,
    }
}

/// A number as an exact value: an integer, or a double that is not one.
#[derive(PartialEq)]
enum Exact {
    Integer(i128),
    Fraction(f64),
}

fn exact(n: &Number) -> Option<Exact> {
    if let Some(i) = n.as_i64() {
        return Some(Exact::Integer(i128::from(i)));
    }
    if let Some(u) = n.as_u64() {
        return Some(Exact::Integer(i128::from(u)));
    }
    let f = n.as_f64()?;
    // Every double of magnitude below 2^127 that has no fraction is an exact i128; the cast is
    // then lossless.
    if f.fract() == 0.0 && f.abs() < 1.7e38 {
        #[allow(clippy::cast_possible_truncation)]
        return Some(Exact::Integer(f as i128));
    }
    Some(Exact::Fraction(f))
}

fn same_number(a: &Number, b: &Number) -> bool {
    match (exact(a), exact(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn numbers_compare_by_exact_value() {
        assert!(same_value(&parse("1"), &parse("1.0")));
        assert!(same_value(&parse("90.0"), &parse("90")));
        assert!(same_value(&parse("-0.0"), &parse("0")));
        assert!(same_value(&parse("1e2"), &parse("100")));
        assert!(same_value(&parse("0.5"), &parse("5e-1")));
        assert!(!same_value(&parse("1"), &parse("1.5")));
        assert!(!same_value(&parse("1"), &parse("\"1\"")));
        // A big integer is exact: the double a JavaScript guest would round it to is another
        // number.
        assert!(same_value(
            &parse("12345678901234567890"),
            &parse("12345678901234567890")
        ));
        assert!(!same_value(
            &parse("12345678901234567890"),
            &parse("12345678901234567000")
        ));
        assert!(!same_value(
            &parse("9007199254740993"),
            &parse("9007199254740992.0")
        ));
        assert!(same_value(
            &parse("-9223372036854775808"),
            &parse("-9223372036854775808.0")
        ));
    }

    #[test]
    fn structures_compare_deeply_with_keys_in_any_order() {
        let a = json!({"x": [1, {"y": 2.0}], "z": null, "s": "t"});
        let b = parse(r#"{"s": "t", "z": null, "x": [1.0, {"y": 2}]}"#);
        assert!(same_value(&a, &b));
        assert!(!same_value(&a, &json!({"x": [1, {"y": 2}], "z": null})));
        assert!(!same_value(&json!([1, 2]), &json!([2, 1])));
        assert!(!same_value(&json!({"a": 1}), &json!({"a": 1, "b": 1})));
        assert!(!same_value(&json!(true), &json!(1)));
    }
}
