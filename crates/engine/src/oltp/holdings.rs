//! What is on the server under the load's database name and whose it is: the checks each
//! engine's code answers before plumb reuses or drops a database it did not create in this run.

/// What is on the server under the load's database name.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    Nothing,
    /// A database plumb load made and loaded whole: its mark (`plumb load: order-entry, 2
    /// warehouses`) and the run that made it (None: made before plumb marked runs).
    Plumbs {
        mark: String,
        run: Option<String>,
    },
    /// A database a plumb run created and had not finished loading (a run that is still going,
    /// or one that was killed): the run's token.
    Unfinished {
        run: String,
    },
    /// Somebody else's.
    Other,
}

/// What a database holds and who owns it: the checks before plumb reuses or drops a database
/// it did not create in this run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Holdings {
    /// The database's owner, where the engine has owners (PostgreSQL, SQL Server).
    pub owner: Option<String>,
    /// The role plumb is connected as.
    pub me: String,
    /// What it holds that plumb does not make: `table notes`, `schema app`, `function f (owned
    /// by alice)`.
    pub foreign: Vec<String>,
}

impl Holdings {
    /// Why the database is not plumb's alone (None: owned by the connecting role, where the
    /// engine has owners, and holding nothing but plumb's objects).
    pub fn not_ours(&self) -> Option<String> {
        if let Some(owner) = &self.owner {
            if owner != &self.me {
                return Some(format!(
                    "it is owned by {owner}, not by {} (the role plumb connects as)",
                    self.me
                ));
            }
        }
        match self.foreign.as_slice() {
            [] => None,
            f => {
                let shown: Vec<&str> = f.iter().take(5).map(String::as_str).collect();
                let more = if f.len() > 5 {
                    format!(" and {} more", f.len() - 5)
                } else {
                    String::new()
                };
                Some(format!(
                    "it holds what plumb does not make: {}{more}",
                    shown.join(", ")
                ))
            }
        }
    }
}

/// Objects (kind, name, owner) against the names plumb makes and the role it connects as:
/// what is foreign, in words.
pub(crate) fn foreign_objects(
    objects: &[(String, String, Option<String>)],
    allowed: &[String],
    me: &str,
) -> Vec<String> {
    objects
        .iter()
        .filter_map(|(kind, name, owner)| {
            let plumbs = allowed.iter().any(|a| a.eq_ignore_ascii_case(name));
            match owner {
                _ if !plumbs => Some(format!("{kind} {name}")),
                Some(o) if o != me => Some(format!("{kind} {name} (owned by {o})")),
                _ => None,
            }
        })
        .collect()
}
