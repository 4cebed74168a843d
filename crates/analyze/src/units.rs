//! Calendar arithmetic shared by analysis and the recorder (bytes and durations become words
//! in `plumb_report::fmt`, never here).

pub use plumb_sys::date::civil;
