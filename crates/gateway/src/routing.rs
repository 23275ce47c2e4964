//! Routes the model name in a guest request (`/v1beta/models/{model}:{method}`) to an upstream
//! model.
//!
//! Gemini CLI calls several Google model names besides the main one (classifier, next-speaker,
//! loop detection, compression, web search, subagents: `gemini-3-flash-preview`,
//! `gemini-3-pro-preview`, `gemini-3.5-flash-lite`, `gemini-2.5-pro`, ...). By default every
//! name goes to the main upstream model; `aliases` can send names (exact or `prefix*`) elsewhere,
//! and `strict_models` refuses everything that is neither an alias nor the upstream model.

use std::collections::BTreeMap;

/// Where a guest model name goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Forward to this upstream model.
    Upstream(String),
    /// Refused (`strict_models`).
    Refused,
}

/// The alias table.
#[derive(Debug, Clone)]
pub struct ModelRouter {
    default_model: String,
    exact: BTreeMap<String, String>,
    /// `(prefix, target)`, longest prefix first.
    prefixes: Vec<(String, String)>,
    strict: bool,
}

impl ModelRouter {
    pub fn new(default_model: &str, aliases: &BTreeMap<String, String>, strict: bool) -> Self {
        let mut exact = BTreeMap::new();
        let mut prefixes = Vec::new();
        for (pattern, target) in aliases {
            match pattern.strip_suffix('*') {
                Some(prefix) => prefixes.push((prefix.to_string(), target.clone())),
                None => {
                    exact.insert(pattern.clone(), target.clone());
                }
            }
        }
        prefixes.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        Self {
            default_model: default_model.to_string(),
            exact,
            prefixes,
            strict,
        }
    }

    pub fn route(&self, guest_model: &str) -> Route {
        if let Some(target) = self.exact.get(guest_model) {
            return Route::Upstream(target.clone());
        }
        if let Some((_, target)) = self
            .prefixes
            .iter()
            .find(|(prefix, _)| guest_model.starts_with(prefix.as_str()))
        {
            return Route::Upstream(target.clone());
        }
        if guest_model == self.default_model || !self.strict {
            return Route::Upstream(self.default_model.clone());
        }
        Route::Refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aliases() -> BTreeMap<String, String> {
        [
            ("gemini-3-flash-preview", "small"),
            ("gemini-2.5-*", "mid"),
            ("gemini-2.5-pro*", "big"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
    }

    #[test]
    fn exact_then_longest_prefix_then_default() {
        let r = ModelRouter::new("main", &aliases(), false);
        assert_eq!(
            r.route("gemini-3-flash-preview"),
            Route::Upstream("small".into())
        );
        assert_eq!(r.route("gemini-2.5-pro"), Route::Upstream("big".into()));
        assert_eq!(r.route("gemini-2.5-flash"), Route::Upstream("mid".into()));
        assert_eq!(
            r.route("gemini-3.5-flash-lite"),
            Route::Upstream("main".into())
        );
    }

    #[test]
    fn strict_refuses_unknown_names_but_keeps_the_upstream_model() {
        let r = ModelRouter::new("main", &aliases(), true);
        assert_eq!(r.route("gemini-3-pro-preview"), Route::Refused);
        assert_eq!(r.route("main"), Route::Upstream("main".into()));
        assert_eq!(r.route("gemini-2.5-flash"), Route::Upstream("mid".into()));
    }
}
