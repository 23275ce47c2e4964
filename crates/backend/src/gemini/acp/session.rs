//! The ACP session's controller and handler: the handshake (`initialize`, `authenticate` with
//! the `gateway` method, `session/new` or `session/load`), the prompts in turn with
//! `session/cancel`, and the answers to what the guest asks (`session/request_permission`
//! through the run's [`PermissionHost`]; anything else "method not found"). Everything is reported as
//! [`Note`]s, in order.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_client_protocol::v1::schema::{
    AuthenticateRequest, CancelNotification, ClientCapabilities, ContentBlock, HttpHeader,
    Implementation, InitializeRequest, LoadSessionRequest, McpServer, McpServerHttp,
    NewSessionRequest, PromptRequest, RequestPermissionRequest, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Dispatch};
use agent_client_protocol::{Agent, Client, Lines, UntypedMessage};
use serde_json::{Value, json};
use switchyard_events::acp::RpcError;
use switchyard_events::event::{Permission, PermissionChoice, PermissionOutcome};
use switchyard_events::{ErrorKind, OutcomeStatus, RunError};

use super::{AcpCancel, AcpPlan, MCP_SERVER_NAME, Note, Notes, PROTOCOL_VERSION};
use crate::permission::{PermissionAsk, PermissionHost};

/// The session's controller: handshake, prompts, cancel.
pub(super) async fn control(
    transport: Lines<
        std::pin::Pin<Box<dyn futures_util::Sink<String, Error = io::Error> + Send>>,
        impl futures_util::Stream<Item = io::Result<String>> + Send + 'static,
    >,
    plan: AcpPlan,
    host: Arc<dyn PermissionHost>,
    cancel: AcpCancel,
    notes: Notes,
) {
    let session = Arc::new(std::sync::Mutex::new(None::<String>));
    let handler = Handler {
        notes: notes.clone(),
        host,
        cancelled: cancel.flag(),
        session: session.clone(),
    };
    let done = notes.clone();
    let result = Client
        .v1()
        .on_receive_dispatch(
            async move |message: Dispatch, _cx| handler.dispatch(message),
            agent_client_protocol::on_receive_dispatch!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            run_session(&cx, plan, &cancel, &notes, &session).await;
            let _ = notes.send(Note::Done);
            Ok(())
        })
        .await;
    if let Err(e) = result {
        let _ = done.send(Note::Failed(
            OutcomeStatus::Incomplete,
            RunError::new(
                ErrorKind::GuestFailure,
                format!("the ACP connection failed: {}", e.message),
            ),
        ));
    }
    let _ = done.send(Note::Done);
}

fn failed(notes: &Notes, kind: ErrorKind, message: String) {
    let _ = notes.send(Note::Failed(
        OutcomeStatus::Failed,
        RunError::new(kind, message),
    ));
}

/// A JSON-RPC error's message with its data, if any.
fn rpc_text(e: &agent_client_protocol::Error) -> String {
    match &e.data {
        Some(data) if !data.is_null() => format!("{} ({data})", e.message),
        _ => e.message.clone(),
    }
}

/// Whether an error came from the guest (an answer) rather than from the connection ending.
fn from_guest(e: &agent_client_protocol::Error) -> bool {
    !agent_client_protocol::is_connection_terminated(e)
        && !agent_client_protocol::is_incoming_transport_closed(e)
}

async fn run_session(
    cx: &ConnectionTo<Agent>,
    plan: AcpPlan,
    cancel: &AcpCancel,
    notes: &Notes,
    session: &std::sync::Mutex<Option<String>>,
) {
    let setup = tokio::time::timeout(plan.startup_timeout, start_session(cx, &plan)).await;
    let session_id = match setup {
        Ok(Ok(id)) => id,
        Ok(Err((kind, message))) => return failed(notes, kind, message),
        Err(_) => {
            return failed(
                notes,
                ErrorKind::GuestFailure,
                format!(
                    "the guest did not open its session within {:?}",
                    plan.startup_timeout
                ),
            );
        }
    };
    *session
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(session_id.clone());
    let _ = notes.send(Note::SessionStarted(session_id.clone()));
    let mut more = plan.more_prompts;
    let mut fixed = plan.prompts.into_iter();
    loop {
        let prompt = match fixed.next() {
            Some(prompt) => prompt,
            None => match &mut more {
                Some(rx) => {
                    // The host owes the next prompt: the guest's silence is no inactivity.
                    cancel.stop_handle().pause_inactivity();
                    let next = tokio::select! {
                        next = rx.recv() => next,
                        () = cancel.notified() => None,
                    };
                    cancel.stop_handle().resume_inactivity();
                    match next {
                        Some(prompt) => prompt,
                        None => return,
                    }
                }
                None => return,
            },
        };
        let prompt = &prompt;
        if cancel.is_cancelled() {
            return;
        }
        let _ = notes.send(Note::PromptSent(prompt.clone()));
        let request = PromptRequest::new(
            session_id.clone(),
            vec![ContentBlock::Text(TextContent::new(prompt.clone()))],
        );
        let answer = cx.send_request(request).block_task();
        tokio::pin!(answer);
        let answer = tokio::select! {
            answer = &mut answer => answer,
                        () = cancel.notified() => {
                let _ = cx.send_notification(CancelNotification::new(session_id.clone()));
                answer.await
            }
        };
        let answered = match answer {
            Ok(response) => Ok(serde_json::to_value(&response).unwrap_or(Value::Null)),
            Err(e) if from_guest(&e) => Err(RpcError {
                code: i64::from(i32::from(e.code)),
                message: e.message,
            }),
            // The guest went away: no answer (the outcome says the run is incomplete).
            Err(_) => return,
        };
        let ok = answered
            .as_ref()
            .is_ok_and(|v| v.get("stopReason").and_then(Value::as_str) == Some("end_turn"));
        let _ = notes.send(Note::PromptAnswered(answered));
        if !ok {
            return;
        }
    }
}

/// `initialize`, `authenticate`, then `session/new` or `session/load`: the session id.
async fn start_session(
    cx: &ConnectionTo<Agent>,
    plan: &AcpPlan,
) -> Result<String, (ErrorKind, String)> {
    let setup_error = |step: &str, e: agent_client_protocol::Error| {
        (
            ErrorKind::GuestFailure,
            format!("{step} failed: {}", e.message),
        )
    };
    let init = cx
        .send_request(
            InitializeRequest::new(PROTOCOL_VERSION)
                .client_capabilities(ClientCapabilities::new())
                .client_info(Implementation::new("switchyard", env!("CARGO_PKG_VERSION"))),
        )
        .block_task()
        .await
        .map_err(|e| setup_error("initialize", e))?;
    if init.protocol_version != PROTOCOL_VERSION {
        return Err((
            ErrorKind::GuestFailure,
            format!(
                "the guest answered protocol version {:?}; Switchyard speaks {:?}",
                init.protocol_version, PROTOCOL_VERSION
            ),
        ));
    }
    if !init
        .auth_methods
        .iter()
        .any(|m| m.id().0.as_ref() == "gateway")
    {
        return Err((
            ErrorKind::Auth,
            "the guest offers no `gateway` authentication method".into(),
        ));
    }
    let meta = json!({
        "gateway": { "baseUrl": plan.gateway_url, "headers": {} },
        "api-key": plan.gateway_key.expose(),
    });
    let meta = meta.as_object().cloned().unwrap_or_default();
    cx.send_request(AuthenticateRequest::new("gateway").meta(meta))
        .block_task()
        .await
        .map_err(|e| {
            (
                ErrorKind::Auth,
                format!("authenticate failed: {}", rpc_text(&e)),
            )
        })?;
    let servers: Vec<McpServer> =
        plan.mcp
            .iter()
            .map(|(url, token)| {
                McpServer::Http(
                    McpServerHttp::new(MCP_SERVER_NAME, url.clone()).headers(vec![
                        HttpHeader::new("Authorization", format!("Bearer {}", token.expose())),
                    ]),
                )
            })
            .collect();
    match &plan.resume {
        None => {
            let created = cx
                .send_request(NewSessionRequest::new(plan.cwd.clone()).mcp_servers(servers))
                .block_task()
                .await
                .map_err(|e| setup_error("session/new", e))?;
            Ok(created.session_id.0.to_string())
        }
        Some(id) => {
            cx.send_request(
                LoadSessionRequest::new(id.clone(), plan.cwd.clone()).mcp_servers(servers),
            )
            .block_task()
            .await
            .map_err(|e| {
                (
                    ErrorKind::Resume,
                    format!("session/load of {id} failed: {}", rpc_text(&e)),
                )
            })?;
            Ok(id.clone())
        }
    }
}

/// Answers what the guest asks and forwards what it says.
struct Handler {
    notes: Notes,
    host: Arc<dyn PermissionHost>,
    cancelled: Arc<AtomicBool>,
    session: Arc<std::sync::Mutex<Option<String>>>,
}

impl Handler {
    fn dispatch(&self, message: Dispatch) -> Result<(), agent_client_protocol::Error> {
        match message {
            Dispatch::Notification(n) => {
                if n.method == "session/update" {
                    let _ = self.notes.send(Note::Update(n.params));
                } else {
                    self.unrecognized("a notification with no mapping", &n);
                }
                Ok(())
            }
            Dispatch::Request(request, responder) => {
                if request.method == "session/request_permission" {
                    return match self.permission(&request.params) {
                        Ok(answer) => responder.respond(answer),
                        Err(error) => responder.respond_with_error(error),
                    };
                }
                self.unrecognized("a request Switchyard does not serve", &request);
                responder.respond_with_error(agent_client_protocol::Error::method_not_found())
            }
            Dispatch::Response(result, router) => router.route_with_result(result),
        }
    }

    fn unrecognized(&self, why: &str, message: &UntypedMessage) {
        let _ = self.notes.send(Note::Unrecognized(
            format!("{why}: {}", message.method),
            Some(message.method.clone()),
            message.params.clone(),
        ));
    }

    /// Decides one `session/request_permission`; the answer, or the error to answer with.
    fn permission(&self, params: &Value) -> Result<Value, agent_client_protocol::Error> {
        let refuse = |tool_call_id: String, options, reason: String| {
            let refused = undecided(tool_call_id, options, PermissionOutcome::Refused);
            let _ = self.notes.send(Note::Permission(Box::new(Permission {
                reason: Some(reason.clone()),
                ..refused
            })));
            Err(agent_client_protocol::Error::invalid_params().data(Value::String(reason)))
        };
        let request: RequestPermissionRequest = match serde_json::from_value(params.clone()) {
            Ok(r) => r,
            Err(e) => {
                let id = params
                    .pointer("/toolCall/toolCallId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                return refuse(
                    id,
                    Vec::new(),
                    format!("unreadable permission request: {e}"),
                );
            }
        };
        let tool_call_id = request.tool_call.tool_call_id.0.to_string();
        let options: Vec<PermissionChoice> = request
            .options
            .iter()
            .map(|o| PermissionChoice {
                option_id: o.option_id.0.to_string(),
                kind: serde_json::to_value(o.kind)
                    .ok()
                    .and_then(|k| k.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                name: o.name.clone(),
            })
            .collect();
        let active = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if active.as_deref() != Some(request.session_id.0.as_ref()) {
            return refuse(
                tool_call_id,
                options,
                format!("session {} is not the active session", request.session_id.0),
            );
        }
        let _ = self.notes.send(Note::PermissionAsked(tool_call_id.clone()));
        if self.cancelled.load(Ordering::Acquire) {
            let cancelled = undecided(tool_call_id, options, PermissionOutcome::Cancelled);
            let _ = self.notes.send(Note::Permission(Box::new(cancelled)));
            return Ok(json!({"outcome": {"outcome": "cancelled"}}));
        }
        let ruling = match self.host.permission(&self.ask(&tool_call_id)) {
            Ok(ruling) => ruling,
            Err(reason) => return refuse(tool_call_id, options, reason),
        };
        let kind = if ruling.allow {
            "allow_once"
        } else {
            "reject_once"
        };
        let matching: Vec<&PermissionChoice> = options.iter().filter(|o| o.kind == kind).collect();
        let [chosen] = matching.as_slice() else {
            let reason = format!(
                "{} options of kind {kind}: the policy's choice is not unique",
                matching.len()
            );
            return refuse(tool_call_id, options, reason);
        };
        let option_id = chosen.option_id.clone();
        let _ = self.notes.send(Note::Permission(Box::new(Permission {
            tool_call_id,
            model_call_id: Some(ruling.model_call_id),
            call_id: Some(ruling.call_id),
            tool: Some(ruling.tool),
            arguments: (!ruling.arguments.is_null()).then_some(ruling.arguments),
            options,
            outcome: if ruling.allow {
                PermissionOutcome::Allowed
            } else {
                PermissionOutcome::Rejected
            },
            rule: Some(ruling.rule),
            option_id: Some(option_id.clone()),
            reason: None,
        })));
        Ok(json!({"outcome": {"outcome": "selected", "optionId": option_id}}))
    }
}

impl Handler {
    /// The request for `tool_call_id` (`<tool>__<call id>`): the delivered call it names, if
    /// any, decided as its own tool.
    fn ask(&self, tool_call_id: &str) -> PermissionAsk {
        let found = tool_call_id
            .match_indices("__")
            .map(|(at, _)| (&tool_call_id[..at], &tool_call_id[at + 2..]))
            .find(|(tool, id)| self.host.delivered(id).is_some_and(|d| d.tool == *tool));
        let (tool, call_id) = match found {
            Some((tool, id)) => (tool.to_owned(), Some(id.to_owned())),
            None => (String::new(), None),
        };
        PermissionAsk {
            named: tool_call_id.to_owned(),
            call_id,
            category: switchyard_events::tools::gemini_tool_category(&tool),
            tool,
            own: true,
            details: Value::Null,
        }
    }
}

/// A permission answer that names no delivered call and selects no option.
fn undecided(
    tool_call_id: String,
    options: Vec<PermissionChoice>,
    outcome: PermissionOutcome,
) -> Permission {
    Permission {
        tool_call_id,
        model_call_id: None,
        call_id: None,
        tool: None,
        arguments: None,
        options,
        outcome,
        rule: None,
        option_id: None,
        reason: None,
    }
}
