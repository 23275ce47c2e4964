//! The Messages ingress: a guest's body is parsed, checked and prepared for the upstream, with
//! the private argument stripped, under the OpenAI and vLLM profiles, and the upstream plan
//! applied; bad bodies are typed errors, never a panic, and an attachment never fails one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_translate::messages_ingress::{
    MessagesIngressOptions, parse_messages_request, prepare_messages_request,
};
use switchyard_translate::plan::{Schemas, apply};
use switchyard_translate::{ConversionCache, Profile};

fuzz_target!(|data: &[u8]| {
    let Ok(request) = parse_messages_request(data) else {
        return;
    };
    let cache = ConversionCache::new(1 << 20);
    for profile in [Profile::OpenAi, Profile::Vllm] {
        let mut provider = profile.options();
        provider.echo_reasoning = true;
        let options = MessagesIngressOptions {
            upstream_model: "m".into(),
            provider,
            strip: Some("_switchyard_call"),
            convert_on_miss: true,
        };
        if let Ok(mut prepared) = prepare_messages_request(request.clone(), &options, Some(&cache))
        {
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
