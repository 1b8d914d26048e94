//! The one rendering of a failed command's error for the user: its messages from the outermost
//! context down to the root cause, joined by ": " as anyhow's `{:#}` joins them, except that a
//! cause whose text the message above it already ends with is not printed again. (A `thiserror`
//! message such as `"{at}: {source}"` that also returns `source` as its cause would otherwise
//! print the cause twice: "x.npy: No such file or directory: No such file or directory".)

/// `err` and its causes as one line ([`culturelens_files::error_line`]).
pub fn render(err: &anyhow::Error) -> String {
    culturelens_files::error_line(err.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `thiserror`-style error whose message ends with its own cause.
    #[derive(Debug)]
    struct Repeats {
        at: &'static str,
        source: std::io::Error,
    }

    impl std::fmt::Display for Repeats {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.at, self.source)
        }
    }

    impl std::error::Error for Repeats {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let err = anyhow::Error::new(Repeats { at: "x.npy", source: io }).context("cannot load the table");
        assert_eq!(format!("{err:#}"), "cannot load the table: x.npy: No such file: No such file");
        assert_eq!(render(&err), "cannot load the table: x.npy: No such file");
        // A context whose own text differs from its cause still shows both.
        let err = anyhow::anyhow!("disk full").context("cannot write out.csv");
        assert_eq!(render(&err), "cannot write out.csv: disk full");
    }
}
