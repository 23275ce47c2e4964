//! The Chat Completions ingress: a guest's body is parsed, checked and prepared for the
//! upstream, with the private argument stripped, under every provider profile, put through a
//! tight sliding window, and the upstream plan applied; bad bodies are typed errors, never a
//! panic, and an attachment never fails one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_translate::chat_ingress::{
    ChatIngressOptions, parse_chat_request, prepare_chat_request,
};
use switchyard_translate::context::{
    ContextConfig, ContextPolicy, apply as apply_context, blocks, estimate_message,
};
use switchyard_translate::plan::{Schemas, apply};

fn window() -> ContextConfig {
    ContextConfig {
        policy: ContextPolicy::SlidingWindow,
        max_input_tokens: 64,
        target_input_tokens: 32,
        min_recent_tool_images: 1,
        image_eviction_batch_size: 1,
        ..ContextConfig::default()
    }
}
use switchyard_translate::{ConversionCache, Profile};

fuzz_target!(|data: &[u8]| {
    let Ok(request) = parse_chat_request(data) else {
        return;
    };
    let cache = ConversionCache::new(1 << 20);
    for profile in [Profile::OpenAi, Profile::LlamaCpp] {
        let options = ChatIngressOptions {
            upstream_model: "m".into(),
            provider: profile.options(),
            strip: Some("_switchyard_call"),
            convert_on_miss: true,
        };
        if let Ok(mut prepared) = prepare_chat_request(request.clone(), &options, Some(&cache)) {
            // The sliding window on whatever history the guest sent: a typed refusal or a
            // request whose every result still follows its call, never a panic.
            let counts: Vec<u32> = prepared.chat.messages.iter().map(estimate_message).collect();
            let mut trimmed = prepared.chat.clone();
            if apply_context(&mut trimmed, &window(), &counts, 0, "estimate").is_ok() {
                assert!(blocks(&trimmed.messages).is_ok());
            }
            let _ = apply(
                &mut prepared.chat,
                &options.provider,
                &mut prepared.report,
                Schemas::Guest,
            );
            let _ = serde_json::to_vec(&prepared.chat);
        }
    }
});
