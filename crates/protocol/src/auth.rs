//! The credential in an `Authorization` header value (RFC 9110 §11: the scheme is
//! case-insensitive and separated from its token by one or more spaces).

/// The token of `Bearer <token>`, whatever the scheme's case; `None` for another scheme or no
/// token.
pub fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let scheme = value.get(..6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let rest = value.get(6..)?;
    let token = rest.trim_ascii_start();
    // At least one space after the scheme, and a token.
    (token.len() < rest.len() && !token.is_empty()).then_some(token.trim_ascii_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_matches_in_any_case_and_the_token_is_kept_exactly() {
        for value in ["Bearer tok", "bearer tok", "BEARER  tok", "bEaReR tok "] {
            assert_eq!(bearer_token(value.as_bytes()), Some(&b"tok"[..]), "{value}");
        }
        assert_eq!(bearer_token(b"Bearer ToK"), Some(&b"ToK"[..]));
        for value in [
            "Bearertok",
            "Bearer",
            "Bearer ",
            "Basic dG9rOg==",
            "tok",
            "",
        ] {
            assert_eq!(bearer_token(value.as_bytes()), None, "{value}");
        }
    }
}
