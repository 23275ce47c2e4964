//! The MCP server the guest reaches host tools through: rmcp's Streamable HTTP service on
//! 127.0.0.1, behind a per-run bearer token (compared in constant time; missing or wrong: 401).
//! rmcp checks Host (loopback only) and refuses any browser Origin. `tools/list` serves the
//! registry with the identity property added to each schema; `tools/call` is
//! [`HostBinding::callback`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::binding::{CallbackOutcome, HostBinding, schema_with_identity};
use crate::tool::ToolOutput;

/// The path the service is mounted at.
pub const MCP_PATH: &str = "/mcp";

#[derive(Clone)]
struct Handler {
    binding: HostBinding,
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .binding
            .registry()
            .tools()
            .map(|tool| {
                let schema = match schema_with_identity(tool.input_schema()) {
                    serde_json::Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                Tool::new(
                    tool.name().to_owned(),
                    tool.description().to_owned(),
                    Arc::new(schema),
                )
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Claude Code names the model's call (the gateway's `tool_use` id) in `_meta`, Codex
        // (the gateway's delivered call id) in `_meta.callId`.
        let guest_call_id = [CLAUDE_CODE_CALL_ID, CODEX_CALL_ID]
            .iter()
            .find_map(|key| {
                request
                    .meta
                    .as_ref()
                    .and_then(|meta| meta.get(*key))
                    .or_else(|| context.meta.get(*key))
            })
            .and_then(|id| id.as_str())
            .map(str::to_owned);
        let arguments = request.arguments.unwrap_or_default();
        let outcome = self
            .binding
            .callback_named(&request.name, arguments, guest_call_id.as_deref())
            .await;
        match outcome {
            CallbackOutcome::Refused(refusal) => Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                format!("switchyard refused this callback: {refusal}"),
                serde_json::to_value(&refusal).ok(),
            )),
            CallbackOutcome::Ran(Ok(output)) => Ok(CallToolResult::success(content(output)).into()),
            CallbackOutcome::Ran(Err(error)) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(error.to_string())]).into())
            }
        }
    }
}

fn content(output: ToolOutput) -> Vec<ContentBlock> {
    let mut blocks = Vec::with_capacity(1 + output.images.len());
    if !output.text.is_empty() || output.images.is_empty() {
        blocks.push(ContentBlock::text(output.text));
    }
    blocks.extend(
        output
            .images
            .into_iter()
            .map(|i| ContentBlock::image(i.data, i.mime_type)),
    );
    blocks
}

/// The `_meta` key of Claude Code's `tools/call`: the model's `tool_use` id.
pub const CLAUDE_CODE_CALL_ID: &str = "claudecode/toolUseId";

/// The `_meta` key of Codex's `tools/call`: the model's call id (as the guest received it).
pub const CODEX_CALL_ID: &str = "callId";

/// The bearer token the guest must present.
#[derive(Clone)]
struct Token(Arc<str>);

async fn require_token(State(token): State<Token>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| switchyard_protocol::auth::bearer_token(v.as_bytes()))
        .unwrap_or_default();
    if bool::from(presented.ct_eq(token.0.as_bytes())) {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "missing or wrong bearer token",
        )
            .into_response()
    }
}

/// A running MCP server; [`McpServer::shutdown`] stops it.
#[derive(Debug)]
pub struct McpServer {
    addr: SocketAddr,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl McpServer {
    /// Serves `binding` on 127.0.0.1 (a free port) behind `token` (which must not be empty).
    pub async fn start(binding: HostBinding, token: &str) -> std::io::Result<Self> {
        if token.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the MCP bearer token is empty",
            ));
        }
        let cancel = CancellationToken::new();
        let handler = Handler { binding };
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            // Stateless, plain JSON answers: every tools/call is one request and one response,
            // with no session or SSE stream to keep.
            StreamableHttpServerConfig::default()
                .with_legacy_session_mode(false)
                .with_json_response(true)
                .enforce_origin_validation()
                .with_cancellation_token(cancel.child_token()),
        );
        let router = axum::Router::new().nest_service(MCP_PATH, service).layer(
            axum::middleware::from_fn_with_state(Token(Arc::from(token)), require_token),
        );
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let stop = cancel.clone();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stop.cancelled_owned().await })
                .await;
            if let Err(e) = served {
                tracing::warn!("MCP server: {e}");
            }
        });
        Ok(Self { addr, cancel, task })
    }

    /// The URL the guest connects to.
    pub fn url(&self) -> String {
        format!("http://{}{MCP_PATH}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and waits for the server task.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        let _ = self.task.await;
    }
}
