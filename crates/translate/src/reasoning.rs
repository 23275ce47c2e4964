//! Carrying an upstream turn's reasoning through the guest, for upstreams that want it back.
//!
//! Some thinking models behind Chat Completions (DeepSeek's, for one) reject a request whose
//! assistant tool-call message lacks the `reasoning_content` they produced for it. The gateway
//! does not keep conversations, and Gemini CLI drops `thought: true` parts from its history; but
//! it sends a `thoughtSignature` on a `functionCall` part back verbatim (see the reference brief
//! for 0.61.0, and the gateway's real-CLI test). So, when asked to
//! ([`crate::ResponseConfig::carry_reasoning`]), the response translation puts a turn's reasoning
//! into the first delivered call's `thoughtSignature` as [`reasoning_signature`], and the request
//! translation ([`crate::ProviderOptions::echo_reasoning`]) turns it back into that assistant
//! message's `reasoning_content`. Signatures that are not ours are stripped as before.

/// What starts a signature that carries reasoning; the reasoning follows as it is (plain text
/// in a JSON string, so records show it and redaction sees it).
pub const REASONING_SIGNATURE_PREFIX: &str = "switchyard-reasoning-v1:";

/// The `thoughtSignature` carrying `reasoning`.
pub fn reasoning_signature(reasoning: &str) -> String {
    format!("{REASONING_SIGNATURE_PREFIX}{reasoning}")
}

/// The reasoning a signature carries; `None` for any other signature.
pub fn reasoning_from_signature(signature: &str) -> Option<String> {
    signature
        .strip_prefix(REASONING_SIGNATURE_PREFIX)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_reasoning_survives_the_round_trip(reasoning in ".*") {
            let signature = reasoning_signature(&reasoning);
            prop_assert_eq!(reasoning_from_signature(&signature), Some(reasoning));
        }
    }

    #[test]
    fn other_signatures_carry_nothing() {
        for signature in [
            "",
            "skip_thought_signature_validator",
            "SIG_ABC123",
            "switchyard-reasoning-v0:old",
        ] {
            assert_eq!(reasoning_from_signature(signature), None, "{signature}");
        }
    }
}
