//! Passwords: where they may come from (a URL, a libpq key=value string, a password file, the
//! environment) and the one function every URL, connection string, command line and error
//! passes through before it reaches an output, a file or a recording: [`redact`].
//!
//! `redact` masks what looks like a password wherever it sits in a text: the password of a
//! `scheme://user:password@host` URL (up to the last `@` of the authority, since people type
//! `@` in passwords unencoded), the value of a `password`, `sslpassword`, `pwd` or `passwd`
//! parameter in a URL's query or a key=value string (quoted or not, with spaces around `=`),
//! and any password plumb was given this run (registered with [`remember`]), wherever a driver
//! or a server echoed it.

use std::sync::Mutex;

const MASK: &str = "***";
const KEYS: [&str; 4] = ["password", "sslpassword", "pwd", "passwd"];

static KNOWN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Remember a password this run was given, so that [`redact`] masks it wherever it appears
/// (a driver's error message, a server's notice). Very short ones are masked only where their
/// syntax shows them (masking a two-letter string everywhere would garble the output).
pub fn remember(secret: &str) {
    if secret.chars().count() < 4 {
        return;
    }
    if let Ok(mut k) = KNOWN.lock() {
        if !k.iter().any(|s| s == secret) {
            k.push(secret.to_string());
            // Longest first, so a password that contains another is masked whole.
            k.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }
}

/// Remember the passwords in a URL or connection string (see [`remember`]).
pub fn remember_in(url: &str) {
    for p in secrets_in(url) {
        remember(&p);
    }
}

/// The passwords a text carries: as given (percent-encoded in a URL) and decoded.
fn secrets_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = text;
    // Each URL in the text, and the text as a whole (a key=value string).
    while let Some(i) = from.find("://") {
        let start = from[..i]
            .rfind(|c: char| !is_scheme_char(c))
            .map(|k| k + 1)
            .unwrap_or(0);
        let after = &from[i + 3..];
        let end = after
            .find(|c: char| c.is_whitespace())
            .unwrap_or(after.len());
        let url = &from[start..i + 3 + end];
        if let Some(raw) = after[..end]
            .rfind('@')
            .and_then(|at| after[..at].split_once(':').map(|(_, p)| p.to_string()))
        {
            out.push(raw);
        }
        if let (_, Some(p)) = split_password(url) {
            out.push(p);
        }
        from = &after[end..];
    }
    if !text.contains("://") {
        if let (_, Some(p)) = split_password(text) {
            out.push(p);
        }
    }
    // A key=value pair anywhere (--engine=... --password=x): what redact masks.
    let masked = mask_keys(text);
    if masked != text {
        let (a, b) = (text.as_bytes(), masked.as_bytes());
        let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let post = a
            .iter()
            .rev()
            .zip(b.iter().rev())
            .take_while(|(x, y)| x == y)
            .count();
        if pre + post < a.len() {
            if let Ok(v) = std::str::from_utf8(&a[pre..a.len() - post]) {
                out.push(v.trim_matches('\'').to_string());
            }
        }
    }
    out.retain(|p| !p.is_empty());
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// The text with its passwords' characters replaced by `*`, the same length in bytes (for
/// rewriting a command line in place). Unchanged when it carries none.
pub fn mask_same_length(text: &str) -> String {
    let mut s = text.to_string();
    for p in secrets_in(text) {
        s = s.replace(&p, &"*".repeat(p.len()));
    }
    s
}

/// The text with every password masked as `***`. Text without one comes back unchanged.
pub fn redact(text: &str) -> String {
    let mut s = mask_userinfo(text);
    s = mask_keys(&s);
    if let Ok(k) = KNOWN.lock() {
        for secret in k.iter() {
            if s.contains(secret.as_str()) {
                s = s.replace(secret.as_str(), MASK);
            }
        }
    }
    s
}

fn is_scheme_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')
}

/// `scheme://user:secret@host` → `scheme://user:***@host`, for every URL in the text. The
/// authority runs to the first whitespace; its userinfo to the last `@` in it.
fn mask_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        // A scheme must precede it.
        let head = &rest[..i];
        let scheme_len = head
            .chars()
            .rev()
            .take_while(|c| is_scheme_char(*c))
            .count();
        out.push_str(&rest[..i + 3]);
        let after = &rest[i + 3..];
        if scheme_len == 0 {
            rest = after;
            continue;
        }
        let end = after
            .find(|c: char| c.is_whitespace() || c == '\'' || c == '"')
            .unwrap_or(after.len());
        let token = &after[..end];
        match token.rfind('@') {
            Some(at) => {
                let userinfo = &token[..at];
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..colon + 1]);
                        out.push_str(MASK);
                        out.push_str(&token[at..]);
                    }
                    None => out.push_str(token),
                }
            }
            None => out.push_str(token),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The value of every password key: `?password=x&`, `password=x`, `password = 'a b'`,
/// `Password=x;` — keys case-insensitive, at the start of the text or after a separator.
fn mask_keys(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let at_boundary = i == 0
            || matches!(
                bytes[i - 1],
                b' ' | b'\t' | b'\n' | b'\r' | b'?' | b'&' | b';' | b',' | b'(' | b'"' | b'\''
            );
        let key = if at_boundary {
            KEYS.iter().find(|k| lower[i..].starts_with(*k))
        } else {
            None
        };
        let Some(key) = key else {
            i += 1;
            continue;
        };
        // Optional blanks, '=', optional blanks.
        let mut j = i + key.len();
        while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t') {
            j += 1;
        }
        if j >= bytes.len() || bytes[j] != b'=' {
            i += 1;
            continue;
        }
        j += 1;
        while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t') {
            j += 1;
        }
        let start = j;
        let end = if j < bytes.len() && bytes[j] == b'\'' {
            // A quoted libpq value: up to the closing quote, backslash escapes inside; an
            // unterminated one runs to the end.
            let mut k = j + 1;
            while k < bytes.len() && bytes[k] != b'\'' {
                if bytes[k] == b'\\' {
                    k += 1;
                }
                k += 1;
            }
            (k + 1).min(bytes.len())
        } else {
            let mut k = j;
            while k < bytes.len()
                && !matches!(bytes[k], b' ' | b'\t' | b'\n' | b'\r' | b'&' | b'#' | b';')
            {
                k += 1;
            }
            k
        };
        if end > start {
            out.push_str(&text[copied..start]);
            out.push_str(MASK);
            copied = end;
        }
        i = end.max(i + 1);
    }
    out.push_str(&text[copied..]);
    out
}

/// One libpq `key=value` pair, the value unquoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub key: String,
    pub value: String,
}

/// Parse a libpq key=value connection string (`host=db password='a b' dbname = x`): blanks
/// around `=`, single-quoted values with `\'` and `\\` escapes. `None` when it is not one.
pub fn parse_conninfo(s: &str) -> Option<Vec<Param>> {
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    let skip = |i: &mut usize| {
        while *i < b.len() && b[*i].is_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip(&mut i);
        if i >= b.len() {
            break;
        }
        let k0 = i;
        while i < b.len() && !b[i].is_whitespace() && b[i] != '=' {
            i += 1;
        }
        let key: String = b[k0..i].iter().collect();
        skip(&mut i);
        if key.is_empty() || i >= b.len() || b[i] != '=' {
            return None;
        }
        i += 1;
        skip(&mut i);
        let mut value = String::new();
        if i < b.len() && b[i] == '\'' {
            i += 1;
            loop {
                if i >= b.len() {
                    return None;
                }
                match b[i] {
                    '\\' if i + 1 < b.len() => {
                        value.push(b[i + 1]);
                        i += 2;
                    }
                    '\'' => {
                        i += 1;
                        break;
                    }
                    c => {
                        value.push(c);
                        i += 1;
                    }
                }
            }
        } else {
            while i < b.len() && !b[i].is_whitespace() {
                if b[i] == '\\' && i + 1 < b.len() {
                    i += 1;
                }
                value.push(b[i]);
                i += 1;
            }
        }
        out.push(Param { key, value });
    }
    Some(out)
}

/// Write parameters back as a libpq string, quoting values that need it.
pub fn render_conninfo(params: &[Param]) -> String {
    params
        .iter()
        .map(|p| {
            let plain = !p.value.is_empty()
                && !p
                    .value
                    .chars()
                    .any(|c| c.is_whitespace() || c == '\'' || c == '\\');
            if plain {
                format!("{}={}", p.key, p.value)
            } else {
                format!(
                    "{}='{}'",
                    p.key,
                    p.value.replace('\\', "\\\\").replace('\'', "\\'")
                )
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn is_password_key(k: &str) -> bool {
    KEYS.iter().any(|x| k.eq_ignore_ascii_case(x))
}

/// The connection string without its password, and the password: a password never goes on a
/// command line (it travels in the environment or a file instead).
pub fn split_password(url: &str) -> (String, Option<String>) {
    if let Some((scheme, rest)) = url.split_once("://") {
        let (main, query) = match rest.find('?') {
            // A '?' inside the userinfo is part of the password: look for the query after the
            // last '@'.
            Some(_) => {
                let at = rest.rfind('@').map(|a| a + 1).unwrap_or(0);
                match rest[at..].find('?') {
                    Some(q) => (&rest[..at + q], Some(&rest[at + q + 1..])),
                    None => (rest, None),
                }
            }
            None => (rest, None),
        };
        let mut pass = None;
        let main = match main.rfind('@') {
            Some(at) => {
                let (userinfo, host) = (&main[..at], &main[at..]);
                match userinfo.split_once(':') {
                    Some((user, p)) => {
                        pass = Some(percent_decode(p));
                        format!("{user}{host}")
                    }
                    None => main.to_string(),
                }
            }
            None => main.to_string(),
        };
        let query = query.map(|q| {
            q.split('&')
                .filter(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    if is_password_key(k) {
                        pass = Some(percent_decode(v));
                        false
                    } else {
                        true
                    }
                })
                .collect::<Vec<_>>()
                .join("&")
        });
        let q = match query {
            Some(q) if !q.is_empty() => format!("?{q}"),
            _ => String::new(),
        };
        return (format!("{scheme}://{main}{q}"), pass);
    }
    match parse_conninfo(url) {
        Some(params) => {
            let mut pass = None;
            let kept: Vec<Param> = params
                .into_iter()
                .filter(|p| {
                    if is_password_key(&p.key) {
                        pass = Some(p.value.clone());
                        false
                    } else {
                        true
                    }
                })
                .collect();
            if pass.is_some() {
                (render_conninfo(&kept), pass)
            } else {
                (url.to_string(), None)
            }
        }
        None => (url.to_string(), None),
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(hex, 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Read a password from a file: a regular file of the caller's own (not a link to one of
/// another's, not /proc), that nobody else can read, with a non-empty first line.
pub fn read_password_file(path: &std::path::Path) -> crate::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let err = |m: String| crate::Error::Setup(format!("{}: {m}", path.display()));
    let f = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let meta = f.metadata().map_err(|e| err(e.to_string()))?;
    if !meta.is_file() {
        return Err(err("not a regular file".into()));
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(err(format!(
            "owned by uid {}, not by you (uid {me}); a password file must be your own",
            meta.uid()
        )));
    }
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(err(format!(
            "readable by others (mode {:o}); chmod 600 it",
            mode & 0o777
        )));
    }
    // /proc and /sys files say size 0 and are not password files.
    // SAFETY: fstatfs on an fd we own, into a zeroed struct.
    let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
    use std::os::unix::io::AsRawFd;
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut sfs) } == 0
        && (sfs.f_type as i64 == libc::PROC_SUPER_MAGIC as i64
            || sfs.f_type as i64 == libc::SYSFS_MAGIC as i64)
    {
        return Err(err("a kernel file, not a password file".into()));
    }
    if meta.len() == 0 {
        return Err(err("empty; put the password on its first line".into()));
    }
    if meta.len() > 4096 {
        return Err(err(format!(
            "{} bytes; a password file holds one line (4 KiB at most)",
            meta.len()
        )));
    }
    let mut text = String::new();
    f.take(4096)
        .read_to_string(&mut text)
        .map_err(|e| err(format!("{e} (a password file is UTF-8 text)")))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        return Err(err(
            "its first line is empty; put the password on its first line".into(),
        ));
    }
    remember(line);
    Ok(line.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_passwords_wherever_they_sit() {
        let cases = [
            (
                "postgres://app:s3cret@db:5432/x",
                "postgres://app:***@db:5432/x",
            ),
            ("postgres://u:p@ss@host/db", "postgres://u:***@host/db"),
            (
                "postgres://u@db/x?sslmode=require&password=PW&connect_timeout=3",
                "postgres://u@db/x?sslmode=require&password=***&connect_timeout=3",
            ),
            ("mysql://root:a:b@h", "mysql://root:***@h"),
            (
                "plumb lab --target=postgres://u:PW@h/db --quick",
                "plumb lab --target=postgres://u:***@h/db --quick",
            ),
            ("postgres://app@db/x", "postgres://app@db/x"),
            (
                "host=db password=s3cret user=app",
                "host=db password=*** user=app",
            ),
            (
                "host=db password='my secret' user=app",
                "host=db password=*** user=app",
            ),
            (
                "host=db password = x user=app",
                "host=db password = *** user=app",
            ),
            (
                "host=db PASSWORD='it\\'s' user=app",
                "host=db PASSWORD=*** user=app",
            ),
            ("Server=x;Pwd=abc;Database=y", "Server=x;Pwd=***;Database=y"),
            ("host=db password='unterminated", "host=db password=***"),
            (
                "plain text, nothing here: a=b c",
                "plain text, nothing here: a=b c",
            ),
            ("  two  spaces  kept ", "  two  spaces  kept "),
            ("the passwords=3 word", "the passwords=3 word"),
        ];
        for (i, o) in cases {
            assert_eq!(redact(i), o, "{i}");
        }
    }

    #[test]
    fn command_lines_are_masked_in_place() {
        for (i, o) in [
            (
                "--target=postgres://u:p%40w@h/db",
                "--target=postgres://u:*****@h/db",
            ),
            (
                "postgres://u@h/db?password=xyz&a=b",
                "postgres://u@h/db?password=***&a=b",
            ),
            ("host=h password='a b'", "host=h password='***'"),
            ("nothing", "nothing"),
        ] {
            let m = mask_same_length(i);
            assert_eq!(m, o, "{i}");
            assert_eq!(m.len(), i.len());
        }
    }

    #[test]
    fn remembered_secrets_are_masked_anywhere() {
        remember("hunter2-long");
        assert_eq!(
            redact("error: bad port \"hunter2-long@h\""),
            "error: bad port \"***@h\""
        );
        remember("ab");
        assert_eq!(redact("about"), "about");
    }

    #[test]
    fn conninfo_round_trips_and_passwords_split_off() {
        let p = parse_conninfo("host=db password='a b\\'c' dbname = shop").unwrap();
        assert_eq!(p[1].value, "a b'c");
        assert_eq!(p[2].key, "dbname");
        assert_eq!(parse_conninfo(&render_conninfo(&p)).unwrap(), p);
        assert!(parse_conninfo("host=db password='open").is_none());
        assert!(parse_conninfo("just words").is_none());
        assert_eq!(
            split_password("host=db password='my secret' dbname=lab"),
            (
                "host=db dbname=lab".to_string(),
                Some("my secret".to_string())
            )
        );
        assert_eq!(
            split_password("postgres://u:p@ss@h:5/db?sslmode=require&password=q"),
            (
                "postgres://u@h:5/db?sslmode=require".to_string(),
                Some("q".to_string())
            )
        );
        assert_eq!(
            split_password("postgres://u:p%40ss@h/db"),
            ("postgres://u@h/db".to_string(), Some("p@ss".to_string()))
        );
        assert_eq!(
            split_password("postgres://u@h/db"),
            ("postgres://u@h/db".to_string(), None)
        );
    }

    #[test]
    fn password_files_must_be_private_regular_and_non_empty() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("pw");
        std::fs::write(&f, "").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_password_file(&f)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        std::fs::write(&f, "\nsecond").unwrap();
        assert!(read_password_file(&f)
            .unwrap_err()
            .to_string()
            .contains("first line"));
        std::fs::write(&f, "pw-one\n").unwrap();
        assert_eq!(read_password_file(&f).unwrap(), "pw-one");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_password_file(&f)
            .unwrap_err()
            .to_string()
            .contains("others"));
        let e = read_password_file(std::path::Path::new("/proc/self/environ")).unwrap_err();
        assert!(e.to_string().contains("kernel file"), "{e}");
        assert!(read_password_file(d.path()).is_err());
        if unsafe { libc::geteuid() } == 0 {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&f, Some(65534), None).unwrap();
            assert!(read_password_file(&f)
                .unwrap_err()
                .to_string()
                .contains("not by you"));
        }
    }
}
