//! HTML made with an escaping builder: text and attribute values are always escaped; only
//! markup plumb made itself (its SVG charts, pages of sections built here) goes in raw.

/// Text for an element's content: `&`, `<` and `>` escaped.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An attribute value (always written in double quotes): quotes escaped as well.
fn escape_attr(s: &str) -> String {
    escape(s).replace('"', "&quot;")
}

#[derive(Default)]
pub struct Html {
    out: String,
}

impl Html {
    pub fn new() -> Html {
        Html::default()
    }

    /// Text, escaped.
    pub fn text(&mut self, s: &str) -> &mut Html {
        self.out.push_str(&escape(s));
        self
    }

    /// Markup plumb made (an SVG chart, a section built with another `Html`).
    pub fn raw(&mut self, trusted: &str) -> &mut Html {
        self.out.push_str(trusted);
        self
    }

    /// `<tag a="v" ...>`; tag and attribute names are plumb's own constants.
    pub fn open(&mut self, tag: &'static str, attrs: &[(&'static str, &str)]) -> &mut Html {
        self.out.push('<');
        self.out.push_str(tag);
        for (k, v) in attrs {
            self.out.push(' ');
            self.out.push_str(k);
            self.out.push_str("=\"");
            self.out.push_str(&escape_attr(v));
            self.out.push('"');
        }
        self.out.push('>');
        self
    }

    pub fn close(&mut self, tag: &'static str) -> &mut Html {
        self.out.push_str("</");
        self.out.push_str(tag);
        self.out.push('>');
        self
    }

    /// An element holding escaped text.
    pub(crate) fn el(
        &mut self,
        tag: &'static str,
        attrs: &[(&'static str, &str)],
        text: &str,
    ) -> &mut Html {
        self.open(tag, attrs).text(text).close(tag)
    }

    /// An element whose content `f` writes.
    pub fn with(
        &mut self,
        tag: &'static str,
        attrs: &[(&'static str, &str)],
        f: impl FnOnce(&mut Html),
    ) -> &mut Html {
        self.open(tag, attrs);
        f(self);
        self.close(tag)
    }

    /// A `<ul>` of escaped items.
    pub fn list(&mut self, items: &[String]) -> &mut Html {
        self.with("ul", &[], |h| {
            for i in items {
                h.el("li", &[], i);
            }
        })
    }

    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped_markup_is_not() {
        let mut h = Html::new();
        h.with("p", &[("title", "a \"b\" <c>")], |h| {
            h.text("x < y & z").raw("<br>");
        });
        assert_eq!(
            h.finish(),
            "<p title=\"a &quot;b&quot; &lt;c&gt;\">x &lt; y &amp; z<br></p>"
        );
        let mut h = Html::new();
        h.list(&["<script>".into()]);
        assert_eq!(h.finish(), "<ul><li>&lt;script&gt;</li></ul>");
    }
}
