//! Series computed from recorded ones, as a DBA computed them in a spreadsheet beside perfmon:
//! `tempdb_used = tempdb_size - tempdb_free`, `cache_hit = hits / (hits + reads) * 100`,
//! `growth = rate(mem.cached_bytes)`.
//!
//! An expression has the four operations, parentheses, numbers, the names of the recording's
//! series (`plumb export FILE --list`) or of series defined before it, and `rate(…)`, the
//! change per second of what is inside. A name with `-` in it (`disk.dm-0.read_iops`) is
//! quoted: `"disk.dm-0.read_iops"`; outside quotes `-` always subtracts. Values combine sample
//! by sample; a sample where an operand has no value, or a division by zero, is a gap.

use std::fmt;

/// A mistake in a series' definition or a name it uses that is not there.
#[derive(Debug, Clone, PartialEq)]
pub struct DeriveError(pub String);

impl fmt::Display for DeriveError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeriveError {}

fn err<T>(s: String) -> Result<T, DeriveError> {
    Err(DeriveError(s))
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Num(f64),
    Series(String),
    Neg(Box<Expr>),
    Rate(Box<Expr>),
    Bin(Op, Box<Expr>, Box<Expr>),
}

/// One `NAME = EXPRESSION`.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    pub name: String,
    pub expr: Expr,
    /// The expression as given, for legends and errors.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Op(char),
    Open,
    Close,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == ':'
}

fn tokens(s: &str) -> Result<Vec<Tok>, DeriveError> {
    let mut out = Vec::new();
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        match c {
            _ if c.is_whitespace() => i += 1,
            '+' | '-' | '*' | '/' => {
                out.push(Tok::Op(c));
                i += 1;
            }
            '(' => {
                out.push(Tok::Open);
                i += 1;
            }
            ')' => {
                out.push(Tok::Close);
                i += 1;
            }
            '"' | '\'' | '`' => {
                let Some(end) = cs[i + 1..].iter().position(|x| *x == c) else {
                    return err(format!(
                        "the quote {c} before position {} is not closed",
                        i + 1
                    ));
                };
                let name: String = cs[i + 1..i + 1 + end].iter().collect();
                if name.trim().is_empty() {
                    return err("an empty quoted name".into());
                }
                out.push(Tok::Name(name));
                i += end + 2;
            }
            _ if c.is_ascii_digit()
                || (c == '.' && cs.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                let start = i;
                while i < cs.len() && (cs[i].is_ascii_digit() || cs[i] == '.') {
                    i += 1;
                }
                // An exponent: 1e6, 2.5E-3.
                if i < cs.len() && (cs[i] == 'e' || cs[i] == 'E') {
                    let mut j = i + 1;
                    if j < cs.len() && (cs[j] == '+' || cs[j] == '-') {
                        j += 1;
                    }
                    if j < cs.len() && cs[j].is_ascii_digit() {
                        i = j;
                        while i < cs.len() && cs[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                }
                if i < cs.len() && is_name_char(cs[i]) {
                    let word: String = cs[start..]
                        .iter()
                        .take_while(|c| is_name_char(**c))
                        .collect();
                    // `disk.dm-0.read_iops` unquoted: the '-' split a name.
                    if start > 0 && cs[start - 1] == '-' {
                        let ok = |c: &char| is_name_char(*c) || *c == '-';
                        let from = cs[..start].iter().rev().take_while(|c| ok(c)).count();
                        let whole: String =
                            cs[start - from..].iter().take_while(|c| ok(c)).collect();
                        return err(format!(
                            "{whole}: a name with '-' in it goes in quotes: \"{whole}\" (outside quotes '-' subtracts)"
                        ));
                    }
                    return err(format!(
                        "{word}: not a number, and a name begins with a letter"
                    ));
                }
                let text: String = cs[start..i].iter().collect();
                let v = text
                    .parse::<f64>()
                    .map_err(|_| DeriveError(format!("{text}: not a number")))?;
                out.push(Tok::Num(v));
            }
            _ if is_name_char(c) => {
                let start = i;
                while i < cs.len() && is_name_char(cs[i]) {
                    i += 1;
                }
                out.push(Tok::Name(cs[start..i].iter().collect()));
            }
            _ => {
                return err(format!(
                    "{c}: not an operation (+ - * /), a name, a number or a parenthesis"
                ))
            }
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn sum(&mut self) -> Result<Expr, DeriveError> {
        let mut e = self.product()?;
        while let Some(Tok::Op(c @ ('+' | '-'))) = self.peek().cloned() {
            self.at += 1;
            let r = self.product()?;
            let op = if c == '+' { Op::Add } else { Op::Sub };
            e = Expr::Bin(op, Box::new(e), Box::new(r));
        }
        Ok(e)
    }

    fn product(&mut self) -> Result<Expr, DeriveError> {
        let mut e = self.unary()?;
        while let Some(Tok::Op(c @ ('*' | '/'))) = self.peek().cloned() {
            self.at += 1;
            let r = self.unary()?;
            let op = if c == '*' { Op::Mul } else { Op::Div };
            e = Expr::Bin(op, Box::new(e), Box::new(r));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, DeriveError> {
        if self.peek() == Some(&Tok::Op('-')) {
            self.at += 1;
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, DeriveError> {
        match self.next() {
            Some(Tok::Num(v)) => Ok(Expr::Num(v)),
            Some(Tok::Name(n)) if self.peek() == Some(&Tok::Open) => {
                if n != "rate" {
                    return err(format!(
                        "{n}(…): no such function (there is rate(…), the change per second)"
                    ));
                }
                self.at += 1;
                let inner = self.sum()?;
                self.close()?;
                Ok(Expr::Rate(Box::new(inner)))
            }
            Some(Tok::Name(n)) => Ok(Expr::Series(n)),
            Some(Tok::Open) => {
                let e = self.sum()?;
                self.close()?;
                Ok(e)
            }
            Some(Tok::Op(c)) => err(format!("{c} where a name or a number belongs")),
            Some(Tok::Close) => err(") where a name or a number belongs".into()),
            None => err("the expression ends where a name or a number belongs".into()),
        }
    }

    fn close(&mut self) -> Result<(), DeriveError> {
        match self.next() {
            Some(Tok::Close) => Ok(()),
            _ => err("a parenthesis is not closed".into()),
        }
    }
}

/// Parse `NAME = EXPRESSION`.
pub fn parse(spec: &str) -> Result<Definition, DeriveError> {
    let Some((name, text)) = spec.split_once('=') else {
        return err(
            "give NAME = EXPRESSION, e.g. 'used_bytes = mem.total_bytes - mem.free_bytes'".into(),
        );
    };
    let name = name.trim();
    if name.is_empty()
        || !name.chars().all(is_name_char)
        || !name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
    {
        return err(format!(
            "{name:?}: a series' name is letters, digits, '_', '.' and ':', beginning with a letter"
        ));
    }
    let text = text.trim();
    let mut p = Parser {
        toks: tokens(text)?,
        at: 0,
    };
    let expr = p.sum()?;
    if let Some(t) = p.peek() {
        return err(match t {
            Tok::Close => ") with no ( before it".to_string(),
            _ => "two operands with no operation between them".to_string(),
        });
    }
    Ok(Definition {
        name: name.to_string(),
        expr,
        text: text.to_string(),
    })
}

impl Expr {
    /// The series it reads, each once, in order.
    pub fn names(&self) -> Vec<&str> {
        let mut v = Vec::new();
        self.walk(&mut v);
        v
    }

    fn walk<'a>(&'a self, v: &mut Vec<&'a str>) {
        match self {
            Expr::Num(_) => {}
            Expr::Series(n) => {
                if !v.contains(&n.as_str()) {
                    v.push(n);
                }
            }
            Expr::Neg(e) | Expr::Rate(e) => e.walk(v),
            Expr::Bin(_, a, b) => {
                a.walk(v);
                b.walk(v);
            }
        }
    }

    /// Its unit from its series' (`None`: a plain number, which takes the other side's unit;
    /// `Some("")`: a ratio of like units). Adding bytes to a rate is refused.
    pub fn unit(&self, unit_of: &dyn Fn(&str) -> String) -> Result<Option<String>, DeriveError> {
        Ok(match self {
            Expr::Num(_) => None,
            Expr::Series(n) => Some(unit_of(n)),
            Expr::Neg(e) => e.unit(unit_of)?,
            Expr::Rate(e) => Some(match e.unit(unit_of)?.as_deref() {
                None | Some("") => "/s".to_string(),
                Some(u) => format!("{u}/s"),
            }),
            Expr::Bin(op, a, b) => {
                let (ua, ub) = (a.unit(unit_of)?, b.unit(unit_of)?);
                match (op, ua, ub) {
                    (_, None, u) | (_, u, None) => u,
                    (Op::Add | Op::Sub, Some(x), Some(y)) if x == y => Some(x),
                    (Op::Add | Op::Sub, Some(x), Some(y)) => {
                        return err(format!(
                            "{} ({}) and {} ({}) are in different units: they cannot be added or subtracted",
                            a.show(),
                            show_unit(&x),
                            b.show(),
                            show_unit(&y)
                        ))
                    }
                    (Op::Div, Some(x), Some(y)) if x == y => Some(String::new()),
                    (Op::Div, Some(x), Some(y)) if y.contains('/') => Some(format!("{x}/({y})")),
                    (Op::Div, Some(x), Some(y)) => Some(format!("{x}/{y}")),
                    (Op::Mul, Some(x), Some(y)) if x.is_empty() => Some(y),
                    (Op::Mul, Some(x), Some(y)) if y.is_empty() => Some(x),
                    (Op::Mul, Some(x), Some(y)) => Some(format!("{x}·{y}")),
                }
            }
        })
    }

    fn show(&self) -> String {
        match self {
            Expr::Num(v) => format!("{v}"),
            Expr::Series(n) => n.clone(),
            Expr::Neg(e) => format!("-{}", e.show()),
            Expr::Rate(e) => format!("rate({})", e.show()),
            Expr::Bin(op, a, b) => {
                let c = match op {
                    Op::Add => '+',
                    Op::Sub => '-',
                    Op::Mul => '*',
                    Op::Div => '/',
                };
                format!("({} {c} {})", a.show(), b.show())
            }
        }
    }

    /// Its value at each sample. `get` gives a series' values, one per sample (NaN: no value);
    /// `t_s` the samples' times in seconds.
    pub fn eval(
        &self,
        get: &dyn Fn(&str) -> Option<Vec<f64>>,
        t_s: &[f64],
    ) -> Result<Vec<f64>, DeriveError> {
        let n = t_s.len();
        Ok(match self {
            Expr::Num(v) => vec![*v; n],
            Expr::Series(name) => {
                let v = get(name).ok_or_else(|| DeriveError(format!("{name}: no such series")))?;
                let mut v = v;
                v.resize(n, f64::NAN);
                v
            }
            Expr::Neg(e) => e.eval(get, t_s)?.into_iter().map(|x| -x).collect(),
            Expr::Rate(e) => rate(&e.eval(get, t_s)?, t_s),
            Expr::Bin(op, a, b) => {
                let (x, y) = (a.eval(get, t_s)?, b.eval(get, t_s)?);
                x.iter()
                    .zip(&y)
                    .map(|(x, y)| {
                        let v = match op {
                            Op::Add => x + y,
                            Op::Sub => x - y,
                            Op::Mul => x * y,
                            Op::Div => x / y,
                        };
                        // A division by zero is a gap, never an infinity on a chart.
                        if v.is_finite() {
                            v
                        } else {
                            f64::NAN
                        }
                    })
                    .collect()
            }
        })
    }
}

fn show_unit(u: &str) -> &str {
    if u.is_empty() {
        "a ratio"
    } else {
        u
    }
}

/// The change per second from the previous sample with a value to each one with a value.
pub fn rate(v: &[f64], t_s: &[f64]) -> Vec<f64> {
    let mut out = vec![f64::NAN; v.len()];
    let mut prev: Option<usize> = None;
    for i in 0..v.len().min(t_s.len()) {
        if !v[i].is_finite() {
            continue;
        }
        if let Some(j) = prev {
            let dt = t_s[i] - t_s[j];
            if dt > 0.0 {
                out[i] = (v[i] - v[j]) / dt;
            }
        }
        prev = Some(i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(name: &str) -> Option<Vec<f64>> {
        match name {
            "a" => Some(vec![10.0, 20.0, 30.0, f64::NAN]),
            "b" => Some(vec![1.0, 2.0, 0.0, 4.0]),
            "disk.dm-0.read_iops" => Some(vec![5.0, 5.0, 5.0, 5.0]),
            _ => None,
        }
    }

    fn eval(spec: &str) -> Result<Vec<f64>, DeriveError> {
        let d = parse(spec)?;
        d.expr.eval(&values, &[0.0, 1.0, 2.0, 4.0])
    }

    fn same(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| (x.is_nan() && y.is_nan()) || (x - y).abs() < 1e-9)
    }

    #[test]
    fn arithmetic_goes_sample_by_sample_with_precedence() {
        let nan = f64::NAN;
        assert!(same(&eval("x = a - b").unwrap(), &[9.0, 18.0, 30.0, nan]));
        // * before +, parentheses first, unary minus.
        assert!(same(
            &eval("x = a + b * 2").unwrap(),
            &[12.0, 24.0, 30.0, nan]
        ));
        assert!(same(
            &eval("x = (a + b) * 2").unwrap(),
            &[22.0, 44.0, 60.0, nan]
        ));
        assert!(same(&eval("x = -b + 1e1").unwrap(), &[9.0, 8.0, 10.0, 6.0]));
        // A division by zero is a gap, not an infinity.
        assert!(same(&eval("x = a / b").unwrap(), &[10.0, 10.0, nan, nan]));
        // Left to right: 8 - 2 - 1 is 5.
        assert!(same(&eval("x = 8 - 2 - 1").unwrap(), &[5.0; 4]));
        // The change per second: (20-10)/1, (30-20)/1; the last sample has no value.
        assert!(same(&eval("x = rate(a)").unwrap(), &[nan, 10.0, 10.0, nan]));
        // Over a gap, from the last value: b went 0 -> 4 over two seconds.
        assert!(same(&eval("x = rate(b)").unwrap(), &[nan, 1.0, -2.0, 2.0]));
        // A quoted name may hold '-'.
        assert!(same(
            &eval("x = \"disk.dm-0.read_iops\" - 1").unwrap(),
            &[4.0; 4]
        ));
    }

    #[test]
    fn mistakes_are_named() {
        let e = |s: &str| eval(s).unwrap_err().0;
        assert_eq!(e("x = a - c"), "c: no such series");
        // Unquoted, the '-' subtracts: the message names what is missing.
        assert_eq!(
            e("x = disk.dm-0.read_iops * 2"),
            "disk.dm-0.read_iops: a name with '-' in it goes in quotes: \"disk.dm-0.read_iops\" (outside quotes '-' subtracts)"
        );
        assert!(e("x a - b").contains("NAME = EXPRESSION"));
        assert!(e("1x = a").contains("beginning with a letter"));
        assert!(e("x = a -").contains("ends where"));
        assert!(e("x = (a - b").contains("not closed"));
        assert!(e("x = a b").contains("no operation between"));
        assert!(e("x = a - b)").contains("no ( before"));
        assert!(e("x = sum(a)").contains("no such function"));
        assert!(e("x = a % b").starts_with("%:"));
        assert!(e("x = 'a").contains("not closed"));
        assert!(e("x = 2a").contains("not a number"));
    }

    #[test]
    fn units_follow_the_arithmetic() {
        let unit_of = |n: &str| -> String {
            match n {
                "used" | "free" => "B".into(),
                "iops" => "/s".into(),
                _ => "%".into(),
            }
        };
        let u = |s: &str| parse(s).unwrap().expr.unit(&unit_of);
        assert_eq!(u("x = used - free").unwrap().as_deref(), Some("B"));
        assert_eq!(
            u("x = used / (used + free) * 100").unwrap().as_deref(),
            Some("")
        );
        assert_eq!(u("x = rate(used)").unwrap().as_deref(), Some("B/s"));
        assert_eq!(u("x = used / iops").unwrap().as_deref(), Some("B/(/s)"));
        assert_eq!(u("x = 2 * 3").unwrap(), None);
        let e = u("x = used + iops").unwrap_err().0;
        assert!(e.contains("used (B) and iops (/s)"), "{e}");
    }
}
