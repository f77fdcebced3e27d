//! A column table for the terminal: a header, rows of cells padded to their column's width
//! (left or right aligned), and free lines of text between them (notes).

use std::fmt::Write as _;

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Padded on the right (names).
    Left,
    /// Padded on the left (figures).
    Right,
}

#[derive(Debug, Clone)]
enum Line {
    Cells(Vec<String>),
    Text(String),
}

/// A table under construction; [`Table::render`] makes its text.
#[derive(Debug, Clone, Default)]
pub struct Table {
    cols: Vec<(String, usize, Align)>,
    lines: Vec<Line>,
}

impl Table {
    /// An empty table without columns.
    pub fn new() -> Table {
        Table::default()
    }

    /// Adds a column: its head, its least width and its alignment.
    pub fn col(mut self, head: &str, width: usize, align: Align) -> Table {
        self.cols.push((head.into(), width, align));
        self
    }

    /// Adds a row (cells beyond the columns are dropped, missing ones are empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.lines.push(Line::Cells(cells));
    }

    /// Adds a line of text as it is (a note under the header, a summary).
    pub fn text(&mut self, line: impl Into<String>) {
        self.lines.push(Line::Text(line.into()));
    }

    fn cells(&self, cells: &[String]) -> String {
        let mut s = String::new();
        for (i, (_, width, align)) in self.cols.iter().enumerate() {
            let c = cells.get(i).map(String::as_str).unwrap_or("");
            if i > 0 {
                s.push(' ');
            }
            let _ = match align {
                Align::Left => write!(s, "{c:<width$}"),
                Align::Right => write!(s, "{c:>width$}"),
            };
        }
        s.trim_end().to_string()
    }

    /// The header, then every row and line in the order they were added; each line ends
    /// with a newline and has no trailing blanks.
    pub fn render(&self) -> String {
        let head: Vec<String> = self.cols.iter().map(|c| c.0.clone()).collect();
        let mut s = self.cells(&head) + "\n";
        for l in &self.lines {
            match l {
                Line::Cells(c) => s.push_str(&self.cells(c)),
                Line::Text(t) => s.push_str(t.trim_end()),
            }
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_padded_to_their_column_and_aligned() {
        let mut t = Table::new()
            .col("switch", 8, Align::Left)
            .col("Mpps", 6, Align::Right)
            .col("status", 0, Align::Left);
        t.text("(a note)");
        t.row(vec!["hayate".into(), "12.50".into(), "ok".into()]);
        t.row(vec!["ovs-dpdk".into()]);
        assert_eq!(
            t.render(),
            "switch     Mpps status\n(a note)\nhayate    12.50 ok\novs-dpdk\n"
        );
    }
}
