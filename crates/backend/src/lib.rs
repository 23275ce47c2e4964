//! placeholder

pub mod install;
pub mod process;
