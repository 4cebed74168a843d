//! `--accept-neighbour`: the flag every command that watches its windows for other work takes.

use clap::Args;

/// `--accept-neighbour`, for the commands whose windows are watched for other work.
#[derive(Debug, Clone, Default, Args)]
pub struct AcceptArg {
    /// A neighbour you accept as part of this host's normal life (a backup or monitoring agent,
    /// another database): a process name, a PID or a cgroup path (/system.slice/x.service),
    /// with its descendants; repeat for more. Its work in a watched window is recorded and
    /// shown as "noted: accepted", never a reason to withhold a figure.
    #[arg(long = "accept-neighbour", value_name = "NAME|PID|CGROUP", value_parser = accept, global = true)]
    pub accept_neighbour: Vec<plumb_analyze::interference::Accept>,
}

fn accept(s: &str) -> Result<plumb_analyze::interference::Accept, String> {
    plumb_analyze::interference::Accept::parse(s)
}
