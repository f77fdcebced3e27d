//! A bench's runs and rows, each one switch in one case: grouping them in the order they first
//! appear, a case's status and medians over its runs ([`Runs`]), the row of a given switch in
//! the same case ([`find`]), and the figures a bar chart shows per case and switch ([`grid`]).

use super::median;

/// One switch in one case of a bench (a topology; a table and churn rate): a run, or the row
/// that sums up a case's runs.
pub trait Entry {
    /// The case without the switch, as the charts label it.
    fn case(&self) -> String;
    /// The switch's name.
    fn switch(&self) -> &str;
}

/// The distinct keys of `items`, in the order they first appear.
pub fn firsts<T, K: PartialEq>(items: impl IntoIterator<Item = T>, key: impl Fn(T) -> K) -> Vec<K> {
    items.into_iter().fold(Vec::new(), |mut v, x| {
        let k = key(x);
        if !v.contains(&k) {
            v.push(k);
        }
        v
    })
}

/// `items` grouped by `key`, the groups in the order their keys first appear.
pub fn groups<'a, T, K: PartialEq>(items: &'a [T], key: impl Fn(&T) -> K) -> Vec<(K, Vec<&'a T>)> {
    let mut out: Vec<(K, Vec<&'a T>)> = Vec::new();
    for x in items {
        let k = key(x);
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(x),
            None => out.push((k, vec![x])),
        }
    }
    out
}

/// The runs of one case: those that were "ok", and the status its row shows.
pub struct Runs<'a, R> {
    /// The runs whose status is "ok".
    pub ok: Vec<&'a R>,
    /// "ok" when every run was, "ok in K of N runs" when some were, else the first run's
    /// status ("" when there was no run).
    pub status: String,
}

impl<'a, R> Runs<'a, R> {
    /// Sorts `all` by their `status`.
    pub fn of(all: &[&'a R], status: impl Fn(&R) -> &str) -> Self {
        let ok: Vec<&'a R> = all.iter().copied().filter(|r| status(r) == "ok").collect();
        let status = match ok.len() {
            0 => all
                .first()
                .map(|r| status(r).to_string())
                .unwrap_or_default(),
            n if n == all.len() => "ok".into(),
            n => format!("ok in {n} of {} runs", all.len()),
        };
        Runs { ok, status }
    }

    /// The median of a figure over the ok runs that have it.
    pub fn median(&self, f: impl Fn(&R) -> Option<f64>) -> Option<f64> {
        median(self.ok.iter().filter_map(|r| f(r)).collect())
    }
}

/// The entry of `switch` in `case`.
pub fn find<'a, E: Entry>(entries: &'a [E], case: &str, switch: &str) -> Option<&'a E> {
    entries
        .iter()
        .find(|e| e.case() == case && e.switch() == switch)
}

/// Each switch's name and its figure in each case, as in [`super::Bars::series`].
pub type Series = Vec<(String, Vec<Option<f64>>)>;

/// What a bar chart of one figure shows: the cases (groups), and per switch (series) the
/// figure in each case, both in the order they first appear.
pub fn grid<E: Entry>(entries: &[E], value: impl Fn(&E) -> Option<f64>) -> (Vec<String>, Series) {
    let cases = firsts(entries, |e| e.case());
    let series = firsts(entries, |e| e.switch().to_string())
        .into_iter()
        .map(|sw| {
            let v = cases
                .iter()
                .map(|c| find(entries, c, &sw).and_then(&value))
                .collect();
            (sw, v)
        })
        .collect();
    (cases, series)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct E(&'static str, &'static str, &'static str, f64);

    impl Entry for E {
        fn case(&self) -> String {
            self.0.into()
        }
        fn switch(&self) -> &str {
            self.1
        }
    }

    #[test]
    fn groups_keep_first_order_and_runs_say_how_many_were_ok() {
        let es = [
            E("b", "x", "ok", 1.0),
            E("a", "x", "ok", 2.0),
            E("b", "x", "failed: gone", 9.0),
            E("b", "x", "ok", 3.0),
            E("a", "y", "skipped", 0.0),
        ];
        assert_eq!(firsts(&es, |e| e.0), ["b", "a"]);
        let g = groups(&es, |e| (e.0, e.1));
        assert_eq!(
            g.iter().map(|(k, v)| (*k, v.len())).collect::<Vec<_>>(),
            [(("b", "x"), 3), (("a", "x"), 1), (("a", "y"), 1)]
        );
        let b = Runs::of(&g[0].1, |e| e.2);
        assert_eq!(b.status, "ok in 2 of 3 runs");
        assert_eq!(b.median(|e| Some(e.3)), Some(2.0));
        assert_eq!(Runs::of(&g[1].1, |e| e.2).status, "ok");
        let y = Runs::of(&g[2].1, |e| e.2);
        assert_eq!(
            (y.status.as_str(), y.median(|e| Some(e.3))),
            ("skipped", None)
        );
        assert_eq!(Runs::<E>::of(&[], |e| e.2).status, "");
    }

    #[test]
    fn the_grid_has_a_value_per_case_and_switch() {
        let es = [
            E("a", "x", "", 1.0),
            E("b", "y", "", 2.0),
            E("b", "x", "", 3.0),
        ];
        let (cases, series) = grid(&es, |e| Some(e.3));
        assert_eq!(cases, ["a", "b"]);
        assert_eq!(
            series,
            [
                ("x".to_string(), vec![Some(1.0), Some(3.0)]),
                ("y".to_string(), vec![None, Some(2.0)])
            ]
        );
        assert_eq!(find(&es, "b", "x").map(|e| e.3), Some(3.0));
    }
}
