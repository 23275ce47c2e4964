//! # switchyard-binding
//!
//! Host tools: what a host hands the agent besides the guest's own tools. A [`HostTool`] has a
//! name, a description, the JSON Schema of its arguments and an async call; a [`ToolRegistry`]
//! checks every call's arguments against that schema before the tool runs, so a malformed call
//! becomes a tool error the model sees and the host tool never runs. `--tools FILE`
//! ([`tools_file`]) declares tools whose handler is a command or a URL.
//!
//! [`ledger`] is the delivered-call ledger and claim-once admission of callbacks. Still to come
//! (issue #22): serving the registry to the guest over authenticated MCP, the gateway feeding the
//! ledger, and the identity argument that tells identical calls apart.

pub mod handlers;
pub mod ledger;
pub mod tool;
pub mod tools_file;

pub use tool::{
    HostTool, RegistryError, ToolError, ToolFuture, ToolImage, ToolOutput, ToolRegistry,
};
pub use tools_file::{ToolsFile, ToolsFileError};
