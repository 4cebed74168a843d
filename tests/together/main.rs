//! The test files whose tests wait (on a server, a child process, a timer) and measure nothing
//! another test could move: one test binary, so that their tests run beside one another, four at
//! a time (.cargo/config.toml), instead of one file after another, and the build links one
//! binary instead of thirteen. `cargo test --test together safety::` runs one file's tests.
//!
//! Every test here takes `common::beside()` first, or `common::alone()` when another plumb
//! running at the same moment would change what it checks: a plumb killed outright, whose
//! leftovers the next plumb command (any, another test's among them) removes and says so, or
//! the state of the whole host (tracefs's instances). tests/architecture.rs checks that each
//! test takes one.

#[path = "../common/mod.rs"]
mod common;

mod delta;
mod fs;
mod lab_ends;
mod ledger;
mod mariadb;
mod mem;
mod package;
mod prometheus;
mod record;
mod replication;
mod report_browser;
mod safety;
mod setup;
mod trace;
