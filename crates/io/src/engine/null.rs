//! The null engine: accepts up to `qd` requests and completes them all at the next reap, moving
//! no data. It measures the tool's own overhead and makes end-to-end tests exact.

use super::{Done, Engine, Req, Slots, Submit};
use crate::job::EngineKind;
use std::io;
use std::time::Duration;

pub struct NullEngine {
    qd: u32,
    queued: Vec<Done>,
    slots: Slots,
    waits: u64,
}

impl NullEngine {
    pub fn new(qd: u32, block: u32) -> NullEngine {
        NullEngine {
            qd,
            queued: Vec::with_capacity(qd as usize),
            slots: Slots::new(qd, block),
            waits: 0,
        }
    }
}

impl Engine for NullEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Null
    }

    fn buf(&mut self, slot: u32) -> &mut [u8] {
        self.slots.get(slot)
    }

    fn submit(&mut self, req: Req) -> io::Result<Submit> {
        if self.queued.len() as u32 >= self.qd {
            return Ok(Submit::Busy);
        }
        self.queued.push(Done {
            slot: req.slot,
            res: req.len as i64,
            synced: req.sync.is_some(),
        });
        Ok(Submit::Queued)
    }

    fn wait(&mut self, _min: u32, _timeout: Option<Duration>) -> io::Result<()> {
        self.waits += 1;
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<Done>) {
        out.append(&mut self.queued);
    }

    fn syscalls(&self) -> u64 {
        0
    }

    fn describe(&self) -> String {
        "null: no I/O; every request completes at the next reap".into()
    }
}
