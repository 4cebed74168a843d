//! The test files that run plumb against real parts (servers, files, devices, cgroups, a
//! browser): one test binary, so that the tests that wait (on a server, a child process, a timer)
//! run beside one another, six at a time (tests/common's `BESIDE`), whichever file they are in,
//! instead of one file after another, and the build links one binary instead of eighteen.
//! `cargo test --test together lab::` runs one file's tests.
//!
//! Every test here takes `common::beside()` first, or `common::alone()` when its figures are
//! what it checks (a lab that judges its windows for neighbours, a timed I/O run, a comparison)
//! or when another plumb running at the same moment would change what it checks: a plumb killed
//! outright, whose leftovers the next plumb command (any, another test's among them) removes and
//! says so, or the state of the whole host (tracefs's instances). No test starts beside one that
//! holds `alone()`; those gather and run one after another (tests/common). tests/architecture.rs
//! checks that each test takes one.

#[path = "../common/mod.rs"]
mod common;

mod delta;
mod explain;
mod fs;
mod interference;
mod io;
mod lab;
mod lab_ends;
mod ledger;
mod load;
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
mod versions;
