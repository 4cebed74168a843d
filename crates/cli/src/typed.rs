//! Flag values checked where the flags are defined: a server's URL (`--engine`, `--primary`,
//! `--standby`) and a length of time. clap says a bad one and exits 2 before a command starts.

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use std::ffi::OsStr;
use std::time::Duration;

/// A server's URL as a typed value: one plumb knows (postgres://, mysql://, mariadb://,
/// mssql://, libpq's key=value), its password remembered for hiding and never echoed. clap's
/// own "invalid value 'URL'" would print the URL as typed, password and all; this names the
/// flag and the URL with its password hidden.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EngineUrl;

impl TypedValueParser for EngineUrl {
    type Value = plumb_engine::Target;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<plumb_engine::Target, clap::Error> {
        let flag = arg
            .and_then(|a| a.get_long())
            .map_or_else(|| "--engine".to_string(), |l| format!("--{l}"));
        let refuse = |why: String| {
            clap::Error::raw(ErrorKind::ValueValidation, format!("{flag} {why}\n")).with_cmd(cmd)
        };
        let Some(url) = value.to_str() else {
            return Err(refuse("is not UTF-8: a database URL is text".into()));
        };
        let t = plumb_engine::Target::new(url);
        t.kind().map_err(|e| refuse(e.to_string()))?;
        Ok(t)
    }
}

/// A value read by a function of the text, refused as plumb refuses every value: the flag, the
/// value as typed and why (`--duration soon: "soon" is not a duration …`), exit 2.
#[derive(Clone, Copy)]
pub(crate) struct Named<T>(pub(crate) fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Named<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg.and_then(|a| a.get_long()).unwrap_or("value");
        let text = value.to_string_lossy();
        (self.0)(&text).map_err(|why| {
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!("--{flag} {text}: {why}\n"),
            )
            .with_cmd(cmd)
        })
    }
}

/// A length of time: `90s`, `2m`, `250ms`, `1h`.
pub(crate) const DURATION: Named<Duration> = Named(duration);

/// Transactions a second: `500` or `500/s`.
pub(crate) const RATE: Named<f64> = Named(rate);

/// `t` with the password from `--password-file` (a file others cannot read), if one is given.
pub(crate) fn with_password(
    mut t: plumb_engine::Target,
    password_file: Option<&std::path::Path>,
) -> anyhow::Result<plumb_engine::Target> {
    if let Some(f) = password_file {
        t.password = Some(
            plumb_engine::read_password_file(f)
                .map_err(|e| crate::quoting(format!("--password-file {e}"), e))?,
        );
    }
    Ok(t)
}

fn duration(s: &str) -> Result<Duration, String> {
    plumb_sys::units::parse_duration(s).map_err(|e| e.0)
}

fn rate(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches("/s").parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err("transactions a second, a number above 0 (500 or 500/s)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Flags {
        #[arg(long, value_parser = EngineUrl)]
        engine: Option<plumb_engine::Target>,
        #[arg(long, value_parser = EngineUrl)]
        primary: Option<plumb_engine::Target>,
        #[arg(long, value_parser = DURATION, default_value = "2m")]
        duration: Duration,
        #[arg(long, value_parser = RATE)]
        rate: Option<f64>,
    }

    #[test]
    fn a_url_plumb_cannot_read_is_refused_by_its_flag_and_its_password_never_shown() {
        let e = Flags::try_parse_from(["t", "--engine", "oracle://app:s3cret@db/x"]).unwrap_err();
        let said = e.to_string();
        assert_eq!(e.exit_code(), 2);
        assert!(
            said.contains("--engine") && said.contains("not a database URL"),
            "{said}"
        );
        assert!(said.contains("db/x") && !said.contains("s3cret"), "{said}");
        let e = Flags::try_parse_from(["t", "--primary", "http://u:pw@h"]).unwrap_err();
        assert!(e.to_string().contains("--primary http://"), "{e}");
        assert!(!e.to_string().contains("pw@"), "{e}");
    }

    #[test]
    fn a_url_plumb_reads_is_a_target_and_a_time_is_a_duration() {
        let f = Flags::try_parse_from([
            "t",
            "--engine",
            "mariadb://root@localhost/x?socket=/run/s",
            "--duration",
            "90s",
        ])
        .unwrap();
        let t = f.engine.unwrap();
        assert_eq!(t.kind().unwrap(), plumb_engine::Kind::Mariadb);
        assert_eq!(f.duration, Duration::from_secs(90));
        let f = Flags::try_parse_from(["t", "--primary", "host=/tmp user=me"]).unwrap();
        assert_eq!(
            f.primary.unwrap().kind().unwrap(),
            plumb_engine::Kind::Postgres
        );
        assert_eq!(f.duration, Duration::from_secs(120));
        let e = Flags::try_parse_from(["t", "--duration", "soon"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .contains("--duration soon: \"soon\" is not a duration"),
            "{e}"
        );
        let f = Flags::try_parse_from(["t", "--rate", "500/s"]).unwrap();
        assert_eq!(f.rate, Some(500.0));
        let e = Flags::try_parse_from(["t", "--rate", "fast"]).unwrap_err();
        assert!(
            e.to_string().contains("--rate fast: transactions a second"),
            "{e}"
        );
    }
}
