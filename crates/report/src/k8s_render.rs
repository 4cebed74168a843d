//! `plumb k8s`: advice and lint findings as text, and the generated manifest as YAML.

use crate::{Render, Table};
use plumb_analyze::k8s::{quantity, Advice, Finding, ManifestPlan, Severity, WorkloadKind};
use plumb_sys::smaps::EngineKind;
use std::io::{self, Write};

impl Render for Advice {
    const KIND: &'static str = "k8s_advice";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "Node")?;
        for e in self.reservations.explain.iter().chain(&self.arithmetic) {
            writeln!(out, "  {}", crate::words::said(e))?;
        }
        if let Some(e) = &self.engine {
            writeln!(
                out,
                "\n{} inside {} (request = limit)",
                e.engine.name(),
                quantity(self.pod_limit_bytes)
            )?;
            for (k, v, why) in &e.settings {
                writeln!(out, "  {k:<24} {v:<10} {}", crate::words::said(why))?;
            }
        }
        if !self.without_limit.is_empty() {
            writeln!(out, "\nWithout a memory limit")?;
            for w in &self.without_limit {
                writeln!(out, "  {}", crate::words::said(w))?;
            }
        }
        for w in &self.warnings {
            writeln!(out, "\n! {}", crate::words::said(w))?;
        }
        Ok(())
    }
}

/// Lint results for one or more files.
#[derive(Debug, serde::Serialize)]
pub struct LintReport {
    pub files: Vec<String>,
    pub findings: Vec<Finding>,
    pub errors: usize,
    pub warnings: usize,
}

impl Render for LintReport {
    const KIND: &'static str = "k8s_lint";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        for f in &self.findings {
            writeln!(
                out,
                "{}:{}: {} [{}] {}: {}",
                f.file,
                f.line,
                match f.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                },
                f.rule,
                f.object,
                crate::words::said(&f.said)
            )?;
        }
        writeln!(
            out,
            "{} file(s): {} error(s), {} warning(s)",
            self.files.len(),
            self.errors,
            self.warnings
        )
    }

    fn table(&self) -> Option<Table> {
        Some(Table {
            headers: ["file", "line", "severity", "rule", "object", "message"]
                .map(String::from)
                .to_vec(),
            rows: self
                .findings
                .iter()
                .map(|f| {
                    vec![
                        f.file.clone(),
                        f.line.to_string(),
                        format!("{:?}", f.severity).to_lowercase(),
                        f.rule.to_string(),
                        f.object.clone(),
                        crate::words::said(&f.said),
                    ]
                })
                .collect(),
        })
    }
}

/// A YAML scalar, quoted when it would otherwise change meaning.
fn q(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:".contains(c))
        && !matches!(
            s,
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n" | "Y" | "N"
        )
        && s.parse::<f64>().is_err();
    if plain {
        s.to_string()
    } else {
        // A YAML double-quoted scalar: backslash escapes for quotes and every control
        // character, so no value can end the line or the document.
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
}

struct Vol {
    name: &'static str,
    path: String,
    size: String,
}

fn pvc(out: &mut String, name: &str, size: &str, class: Option<&str>) {
    out.push_str("---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n");
    out.push_str(&format!(
        "  name: {}\nspec:\n  accessModes:\n  - ReadWriteOnce\n",
        q(name)
    ));
    if let Some(c) = class {
        out.push_str(&format!("  storageClassName: {}\n", q(c)));
    }
    out.push_str(&format!(
        "  resources:\n    requests:\n      storage: {}\n",
        q(size)
    ));
}

/// The manifest: PVCs (or claim templates), the workload, and a Service. It passes
/// `plumb k8s lint` with no findings.
/// A command line as a one-line comment: control characters shown escaped.
fn one_line(command_line: &str) -> String {
    command_line
        .chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

pub fn manifest_yaml(p: &ManifestPlan, command_line: &str) -> String {
    let name = &p.name;
    let mem = quantity(p.memory_limit_bytes);
    let (port, vols, secret_key) = engine_volumes(p);
    let (env, args) = env_and_args(p, secret_key);
    let mut s = String::new();
    header(&mut s, p, &mem, secret_key, command_line);
    if p.kind == WorkloadKind::Deployment {
        for v in &vols {
            pvc(
                &mut s,
                &format!("{name}-{}", v.name),
                &v.size,
                p.storage_class.as_deref(),
            );
        }
    }
    s.push_str("---\napiVersion: apps/v1\n");
    s.push_str(&format!(
        "kind: {}\nmetadata:\n  name: {}\n  labels:\n    app: {}\nspec:\n  replicas: 1\n",
        if p.kind == WorkloadKind::Deployment {
            "Deployment"
        } else {
            "StatefulSet"
        },
        q(name),
        q(name)
    ));
    if p.kind == WorkloadKind::Deployment {
        s.push_str("  # One database, ReadWriteOnce volumes: stop the old pod before starting the new one.\n");
        s.push_str("  strategy:\n    type: Recreate\n");
    } else {
        s.push_str(&format!("  serviceName: {}\n", q(name)));
    }
    s.push_str(&format!(
        "  selector:\n    matchLabels:\n      app: {}\n",
        q(name)
    ));
    s.push_str(&format!(
        "  template:\n    metadata:\n      labels:\n        app: {}\n    spec:\n",
        q(name)
    ));
    s.push_str("      terminationGracePeriodSeconds: 60\n");
    if p.engine == EngineKind::Mssql {
        s.push_str("      securityContext:\n        fsGroup: 10001\n");
    }
    s.push_str(&format!(
        "      containers:\n      - name: {}\n        image: {}\n        ports:\n        - containerPort: {port}\n",
        q(match p.engine {
            EngineKind::Mssql => "mssql",
            EngineKind::Postgres => "postgres",
            EngineKind::Mariadb => "mariadb",
        }),
        q(&p.image)
    ));
    if !args.is_empty() {
        s.push_str("        args:\n");
        for a in &args {
            s.push_str(&format!("        - {}\n", q(a)));
        }
    }
    s.push_str("        env:\n");
    for (k, v) in &env {
        match v {
            Some(v) => s.push_str(&format!("        - name: {}\n          value: {}\n", q(k), q(v))),
            None => s.push_str(&format!(
                "        - name: {}\n          valueFrom:\n            secretKeyRef:\n              name: {}\n              key: {}\n",
                q(k),
                q(&p.secret_name),
                q(k)
            )),
        }
    }
    s.push_str("        resources:\n");
    for which in ["requests", "limits"] {
        s.push_str(&format!(
            "          {which}:\n            memory: {}\n",
            q(&mem)
        ));
        if let Some(c) = &p.cpu {
            s.push_str(&format!("            cpu: {}\n", q(c)));
        }
    }
    s.push_str("        volumeMounts:\n");
    for v in &vols {
        s.push_str(&format!(
            "        - name: {}\n          mountPath: {}\n",
            q(v.name),
            q(&v.path)
        ));
    }
    if p.kind == WorkloadKind::Deployment {
        s.push_str("      volumes:\n");
        for v in &vols {
            s.push_str(&format!(
                "      - name: {}\n        persistentVolumeClaim:\n          claimName: {}\n",
                q(v.name),
                q(&format!("{name}-{}", v.name))
            ));
        }
    } else {
        s.push_str("  volumeClaimTemplates:\n");
        for v in &vols {
            s.push_str(&format!("  - metadata:\n      name: {}\n    spec:\n      accessModes:\n      - ReadWriteOnce\n", q(v.name)));
            if let Some(c) = &p.storage_class {
                s.push_str(&format!("      storageClassName: {}\n", q(c)));
            }
            s.push_str(&format!(
                "      resources:\n        requests:\n          storage: {}\n",
                q(&v.size)
            ));
        }
    }
    s.push_str(&format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {}\nspec:\n",
        q(name)
    ));
    if p.kind == WorkloadKind::StatefulSet {
        s.push_str("  clusterIP: None\n");
    }
    s.push_str(&format!(
        "  selector:\n    app: {}\n  ports:\n  - protocol: TCP\n    port: {port}\n    targetPort: {port}\n",
        q(name)
    ));
    s
}

/// The engine's port, its volumes and the variable its password is read from.
fn engine_volumes(p: &ManifestPlan) -> (u16, Vec<Vol>, &'static str) {
    match p.engine {
        EngineKind::Mssql => (
            1433,
            vec![
                Vol {
                    name: "system",
                    path: "/var/opt/mssql".into(),
                    size: p.system_size.clone(),
                },
                Vol {
                    name: "data",
                    path: "/var/opt/mssql-data".into(),
                    size: p.data_size.clone(),
                },
                Vol {
                    name: "log",
                    path: "/var/opt/mssql-log".into(),
                    size: p.log_size.clone(),
                },
            ],
            "MSSQL_SA_PASSWORD",
        ),
        EngineKind::Postgres => (
            5432,
            vec![
                Vol {
                    name: "data",
                    path: "/var/lib/postgresql/data".into(),
                    size: p.data_size.clone(),
                },
                Vol {
                    name: "wal",
                    path: "/var/lib/postgresql/wal".into(),
                    size: p.log_size.clone(),
                },
            ],
            "POSTGRES_PASSWORD",
        ),
        EngineKind::Mariadb => (
            3306,
            vec![
                Vol {
                    name: "data",
                    path: "/var/lib/mysql".into(),
                    size: p.data_size.clone(),
                },
                Vol {
                    name: "binlog",
                    path: "/var/lib/mysql-binlog".into(),
                    size: p.log_size.clone(),
                },
            ],
            "MARIADB_ROOT_PASSWORD",
        ),
    }
}

/// The container's environment (a None value: from the password secret) and arguments.
fn env_and_args(
    p: &ManifestPlan,
    secret_key: &'static str,
) -> (Vec<(String, Option<String>)>, Vec<String>) {
    let mut env: Vec<(String, Option<String>)> = Vec::new();
    let mut args: Vec<String> = Vec::new();
    let val = |k: &str| {
        p.settings
            .settings
            .iter()
            .find(|s| s.0 == k)
            .map(|s| s.1.clone())
            .unwrap_or_default()
    };
    match p.engine {
        EngineKind::Mssql => {
            env.push(("ACCEPT_EULA".into(), Some("Y".into())));
            env.push((secret_key.into(), None));
            env.push((
                "MSSQL_MEMORY_LIMIT_MB".into(),
                Some(val("MSSQL_MEMORY_LIMIT_MB")),
            ));
            env.push(("MSSQL_DATA_DIR".into(), Some("/var/opt/mssql-data".into())));
            env.push(("MSSQL_LOG_DIR".into(), Some("/var/opt/mssql-log".into())));
        }
        EngineKind::Postgres => {
            env.push((secret_key.into(), None));
            env.push((
                "PGDATA".into(),
                Some("/var/lib/postgresql/data/pgdata".into()),
            ));
            env.push((
                "POSTGRES_INITDB_WALDIR".into(),
                Some("/var/lib/postgresql/wal/pg_wal".into()),
            ));
            for k in [
                "shared_buffers",
                "effective_cache_size",
                "work_mem",
                "maintenance_work_mem",
                "max_connections",
            ] {
                args.push("-c".into());
                args.push(format!("{k}={}", val(k)));
            }
        }
        EngineKind::Mariadb => {
            env.push((secret_key.into(), None));
            args.push(format!(
                "--innodb-buffer-pool-size={}",
                val("innodb_buffer_pool_size")
            ));
            args.push("--log-bin=/var/lib/mysql-binlog/binlog".into());
        }
    }
    (env, args)
}

/// The comment the manifest opens on: how it was made, the engine's memory inside the limit,
/// and the secret to create first.
fn header(s: &mut String, p: &ManifestPlan, mem: &str, secret_key: &str, command_line: &str) {
    let one_line = one_line(command_line);
    s.push_str(&format!("# Generated by: {one_line}\n"));
    s.push_str(&format!(
        "# {} with a Guaranteed {} memory request = limit; engine memory inside it:\n",
        p.engine.name(),
        mem
    ));
    for (k, v, why) in p.settings.settings.iter().filter(|x| !x.0.starts_with('(')) {
        s.push_str(&format!("#   {k} = {v}: {}\n", crate::words::said(why)));
    }
    s.push_str(&format!(
        "# Create the password secret first:\n#   kubectl create secret generic {} --from-literal={}='<a strong password>'\n",
        p.secret_name, secret_key
    ));
}

/// A DaemonSet that runs `plumb record --serve` on every node with only what it needs: the
/// node's PID namespace and network (its processes, its hostname, its IP), `/proc` and `/sys`
/// read-only, two capabilities, no service account token, nothing written.
pub fn plumb_daemonset_yaml(p: &plumb_analyze::k8s::PlumbPlan, command_line: &str) -> String {
    let name = q(&p.name);
    let mem = q(&quantity(p.memory_limit_bytes));
    let one_line = one_line(command_line);
    let mut args = vec![
        "record".to_string(),
        "--sysroot=/host".to_string(),
        format!("--serve=$(HOST_IP):{}", p.port),
        format!("--interval={}", p.interval),
    ];
    if p.engine_server {
        args.push("--engine-server".into());
    }
    let args: String = args
        .iter()
        .map(|a| format!("        - {}\n", q(a)))
        .collect();
    format!(
        r#"# Generated by: {one_line}
# plumb on every node: records the node (CPU, memory, PSI, run queue, disks{trees}) and serves
# the live figures on the node's IP, port {port}, at /metrics for Prometheus (docs/fleet.md).
# Privileges, and why:
#   hostPID, /proc read-only   the node's processes (database servers' trees, their memory)
#   hostNetwork                the node's hostname as the host label, and its IP to listen on
#   /sys read-only             block devices and cgroups
#   SYS_PTRACE, DAC_READ_SEARCH read other users' /proc/PID/smaps_rollup and io (the kernel asks
#                              for both); every other capability is dropped
#   no service account token, a read-only root filesystem, no file written
# The image: build it from examples/Dockerfile (see docs/fleet.md) and push it where the
# nodes pull from, then give it with --image.
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {name}
  labels:
    app: {name}
automountServiceAccountToken: false
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {name}
  labels:
    app: {name}
spec:
  selector:
    matchLabels:
      app: {name}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  template:
    metadata:
      labels:
        app: {name}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: "{port}"
        prometheus.io/path: /metrics
    spec:
      serviceAccountName: {name}
      automountServiceAccountToken: false
      hostPID: true
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      # Every node, tainted ones too: the database nodes are often tainted.
      tolerations:
      - operator: Exists
      terminationGracePeriodSeconds: 10
      containers:
      - name: plumb
        image: {image}
        args:
{args}        env:
        - name: HOST_IP
          valueFrom:
            fieldRef:
              fieldPath: status.hostIP
        ports:
        - name: metrics
          containerPort: {port}
        readinessProbe:
          httpGet:
            path: /metrics
            port: {port}
          periodSeconds: 30
        resources:
          requests:
            cpu: 10m
            memory: {mem}
          limits:
            memory: {mem}
        securityContext:
          runAsUser: 0
          privileged: false
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop:
            - ALL
            add:
            - SYS_PTRACE
            - DAC_READ_SEARCH
        volumeMounts:
        - name: proc
          mountPath: /host/proc
          readOnly: true
        - name: sys
          mountPath: /host/sys
          readOnly: true
      volumes:
      - name: proc
        hostPath:
          path: /proc
      - name: sys
        hostPath:
          path: /sys
"#,
        trees = if p.engine_server {
            ", the database servers' process trees"
        } else {
            ""
        },
        port = p.port,
        image = q(&p.image),
    )
}
