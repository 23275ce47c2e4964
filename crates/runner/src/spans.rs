//! The run's trace (GenAI conventions): `invoke_agent {agent}` for the run, `execute_tool
//! {name}` from each `tool_call` to its `tool_result`, one `host_tool {name}` span per host-tool
//! callback with the binding's decision, and permission decisions as events of their call's
//! span. The gateway's `chat` spans are children of the run's.

use std::collections::HashMap;
use std::sync::Arc;

use switchyard_events::{Event, RunOutcome};
use switchyard_telemetry::{
    Context, KeyValue, Status, Telemetry, TraceContextExt as _, Tracer as _,
};

/// The spans of one run.
pub(crate) struct RunSpans {
    telemetry: Arc<Telemetry>,
    run: Context,
    /// Open tool spans by delivered call id.
    tools: HashMap<String, Context>,
    /// Open host-tool callback spans by delivered call id.
    host: HashMap<String, Context>,
}

fn name<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl RunSpans {
    pub fn start(telemetry: Arc<Telemetry>, agent: &str, version: &str, run_id: &str) -> Self {
        let tracer = telemetry.tracer();
        let span = tracer
            .span_builder(format!("invoke_agent {agent}"))
            .with_attributes(vec![
                KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                KeyValue::new("gen_ai.agent.name", agent.to_owned()),
                KeyValue::new("gen_ai.agent.version", version.to_owned()),
                KeyValue::new("switchyard.run_id", run_id.to_owned()),
            ])
            .start(tracer);
        Self {
            run: Context::new().with_span(span),
            telemetry,
            tools: HashMap::new(),
            host: HashMap::new(),
        }
    }

    /// The run's span, the parent of the gateway's.
    pub fn context(&self) -> Context {
        self.run.clone()
    }

    fn child(&self, name: String, attributes: Vec<KeyValue>) -> Context {
        let tracer = self.telemetry.tracer();
        let span = tracer
            .span_builder(name)
            .with_attributes(attributes)
            .start_with_context(tracer, &self.run);
        self.run.with_span(span)
    }

    /// One event of the run.
    pub fn event(&mut self, event: &Event) {
        match event {
            Event::ToolCall(call) => {
                let span = self.child(
                    format!("execute_tool {}", call.tool_name),
                    vec![
                        KeyValue::new("gen_ai.operation.name", "execute_tool"),
                        KeyValue::new("gen_ai.tool.name", call.tool_name.clone()),
                        KeyValue::new("gen_ai.tool.call.id", call.model_call_id.clone()),
                        KeyValue::new("switchyard.call_id", call.call_id.clone()),
                        KeyValue::new("switchyard.tool.category", call.category.name()),
                    ],
                );
                self.tools.insert(call.call_id.clone(), span);
            }
            Event::ToolResult(result) => {
                if let Some(span) = self.tools.remove(&result.call_id) {
                    let span = span.span();
                    span.set_attribute(KeyValue::new(
                        "switchyard.tool.status",
                        name(&result.status),
                    ));
                    if let Some(error) = &result.error {
                        span.set_attribute(KeyValue::new("error.type", error.kind.clone()));
                        span.set_status(Status::error(error.kind.clone()));
                    }
                    span.end();
                }
            }
            Event::Permission(permission) => {
                let target = permission
                    .call_id
                    .as_ref()
                    .and_then(|id| self.tools.get(id))
                    .unwrap_or(&self.run);
                target.span().add_event(
                    "permission",
                    vec![
                        KeyValue::new("switchyard.permission.outcome", name(&permission.outcome)),
                        KeyValue::new(
                            "switchyard.permission.rule",
                            permission.rule.clone().unwrap_or_default(),
                        ),
                    ],
                );
            }
            Event::HostCall(call) => {
                let decision = name(&call.decision);
                let span = self.child(
                    format!("host_tool {}", call.tool),
                    vec![
                        KeyValue::new("gen_ai.tool.name", call.tool.clone()),
                        KeyValue::new(
                            "gen_ai.tool.call.id",
                            call.model_call_id.clone().unwrap_or_default(),
                        ),
                        KeyValue::new("switchyard.host.decision", decision.clone()),
                    ],
                );
                match (&call.call_id, decision.as_str()) {
                    (Some(id), "admitted") => {
                        self.host.insert(id.clone(), span);
                    }
                    _ => span.span().end(),
                }
            }
            Event::HostResult(result) => {
                if let Some(span) = result.call_id.as_ref().and_then(|id| self.host.remove(id)) {
                    span.span().set_attribute(KeyValue::new(
                        "switchyard.tool.status",
                        name(&result.status),
                    ));
                    span.span().end();
                }
            }
            _ => {}
        }
    }

    /// Ends every span, the run's with its outcome, and sends what is queued.
    pub fn finish(mut self, outcome: &RunOutcome) {
        for (_, span) in self.tools.drain().chain(self.host.drain()) {
            span.span().end();
        }
        let run = self.run.span();
        run.set_attribute(KeyValue::new("switchyard.outcome", name(&outcome.status)));
        if let Some(error) = &outcome.error {
            run.set_attribute(KeyValue::new("error.type", name(&error.kind)));
            run.set_status(Status::error(error.message.clone()));
        }
        run.end();
        self.telemetry.shutdown();
        let dropped = self.telemetry.dropped();
        if dropped > 0 {
            eprintln!(
                "switchyard: {dropped} trace span(s) could not be sent to the OTLP collector"
            );
        }
    }
}
