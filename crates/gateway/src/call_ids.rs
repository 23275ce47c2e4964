//! The ids the gateway gives the calls it delivers: `call_` and the base64url of a random nonce,
//! the upstream's own id for the call (when it is short enough to carry) and a MAC over them and
//! the call-id session, under a key every replica of a gateway shares (derived from the ingress
//! key; a random one without). So any replica can tell a delivered id of the session from a
//! forged one and give the upstream its own id back, with nothing in another replica's memory.
//! The session's ledger (`sessions`) stays the fast path: an id is opened only when the ledger
//! has no upstream id for it, and what its seal carries is then remembered there.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// Random bytes per id.
const NONCE: usize = 8;
/// MAC bytes per id (80 bits: a forged id is accepted with probability 2^-80).
const TAG: usize = 10;
/// The longest upstream id an id carries; a longer one is not restored by another replica.
pub const MAX_CARRIED_UPSTREAM_ID: usize = 64;
const PREFIX: &str = "call_";

/// Seals and opens delivered call ids.
pub(crate) struct CallIds {
    key: hmac::Key,
    random: SystemRandom,
}

impl std::fmt::Debug for CallIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallIds(<key>)")
    }
}

impl CallIds {
    /// Ids under a key derived from `secret` (the ingress key: every replica behind one load
    /// balancer shares it), or a random key for this process when there is none.
    pub fn new(secret: Option<&str>) -> Self {
        let random = SystemRandom::new();
        let key = match secret {
            Some(secret) => {
                let root = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
                let derived = hmac::sign(&root, b"switchyard call ids v1");
                hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref())
            }
            None => {
                let mut bytes = [0u8; 32];
                // The OS generator does not fail on Linux; a zero key is still a key.
                let _ = random.fill(&mut bytes);
                hmac::Key::new(hmac::HMAC_SHA256, &bytes)
            }
        };
        Self { key, random }
    }

    fn tag(&self, session: &str, body: &[u8]) -> hmac::Tag {
        let mut context = hmac::Context::with_key(&self.key);
        context.update(
            &u32::try_from(session.len())
                .unwrap_or(u32::MAX)
                .to_be_bytes(),
        );
        context.update(session.as_bytes());
        context.update(body);
        context.sign()
    }

    /// A fresh id for a call delivered in `session`, carrying `upstream` (the upstream's own id)
    /// when there is one of at most [`MAX_CARRIED_UPSTREAM_ID`] bytes.
    pub fn seal(&self, session: &str, upstream: Option<&str>) -> String {
        let upstream = upstream
            .filter(|u| u.len() <= MAX_CARRIED_UPSTREAM_ID)
            .unwrap_or_default();
        let mut body = vec![0u8; NONCE];
        let _ = self.random.fill(&mut body);
        body.push(u8::try_from(upstream.len()).unwrap_or(0));
        body.extend_from_slice(upstream.as_bytes());
        let tag = self.tag(session, &body);
        body.extend_from_slice(&tag.as_ref()[..TAG]);
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(body))
    }

    /// Whether `id` is one this gateway (any replica) delivered in `session`, and if so the
    /// upstream id it carries (`Some(None)`: none).
    pub fn open(&self, session: &str, id: &str) -> Option<Option<String>> {
        let encoded = id.strip_prefix(PREFIX)?;
        if encoded.len() > (NONCE + 1 + MAX_CARRIED_UPSTREAM_ID + TAG).div_ceil(3) * 4 {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(encoded).ok()?;
        let (body, tag) = bytes.split_at_checked(bytes.len().checked_sub(TAG)?)?;
        let len = usize::from(*body.get(NONCE)?);
        if body.len() != NONCE + 1 + len {
            return None;
        }
        let expected = self.tag(session, body);
        let same: bool = subtle::ConstantTimeEq::ct_eq(&expected.as_ref()[..TAG], tag).into();
        if !same {
            return None;
        }
        let upstream = std::str::from_utf8(&body[NONCE + 1..]).ok()?;
        Some((!upstream.is_empty()).then(|| upstream.to_owned()))
    }
}

#[cfg(test)]
#[path = "call_ids_tests.rs"]
mod tests;
