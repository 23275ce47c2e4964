//! # switchyard-binding
//!
//! Host tools: what a host hands the agent besides the guest's own tools. A [`HostTool`] has a
//! name, a description, the JSON Schema of its arguments and an async call; a [`ToolRegistry`]
//! checks every call's arguments against that schema before the tool runs, so a malformed call
//! becomes a tool error the model sees and the host tool never runs. `--tools FILE`
//! ([`tools_file`]) declares tools whose handler is a command or a URL; `--finish-schema`
//! adds the [`finish`] tool.
//!
//! [`HostBinding`] ties callbacks to model calls: the gateway enters each delivered batch in
//! the [`ledger`] with a private identity per call, and [`mcp`] serves the registry to the guest
//! over authenticated MCP, admitting a callback only for a delivered, unclaimed call, once, in
//! the model's order.
//!
//! For guests that ask permission (ACP), the gateway also enters every delivered call in the
//! [`delivered`] table, and [`permissions`] is the unattended policy that decides each request
//! from the call's delivered arguments.

pub mod binding;
pub mod delivered;
pub mod finish;
pub mod handlers;
pub mod ledger;
pub mod mcp;
pub mod permissions;
pub mod tool;
pub mod tools_file;
/// JSON values compared as values (moved to the events crate, which every backend shares).
pub use switchyard_events::values;

pub use binding::{
    BindingLimits, CallbackOutcome, DEFAULT_BATCH_WAIT, Delivery, DrainReport, HostBinding,
    IDENTITY_ARG, schema_with_identity,
};
pub use delivered::{DeliveredCall, PermissionRefusal};
pub use finish::{FINISH_TOOL, FinishSlot, FinishTool};
pub use ledger::{OfferError, OfferedCall, Refusal};
pub use mcp::McpServer;
pub use permissions::{Decision, Policy, PolicyError, Ruling};
pub use tool::{
    HostTool, RegistryError, ToolError, ToolFuture, ToolImage, ToolOutput, ToolRegistry,
};
pub use tools_file::{ToolsFile, ToolsFileError};
