//! National association (CulText2I §6.1, Fig. 5), from the `culturelens cultext2i` outputs a
//! bundle carries: for one model, the NA confusion matrix of its `--report` (rows = the
//! nationality the images were meant to show, columns = the one NA predicts, in the report's
//! nationality order) drawn as row shares on viridis with the values printed, and the report's
//! accuracy, as `culturelens figures` draws `cultext2i_confusion_MODEL`
//! (`culturelens_view::cultext2i::row_shares`); below it the model's rows of the `--out` table
//! (NA, accuracy, CD and DP per language, concept and template). Cells and rows carry their
//! numbers in full precision (`data-count`, `data-share`, `data-value`).

use std::collections::BTreeSet;

use super::colour::{css, ink, sequential_rgb};
use super::{pick, svg_label};
use crate::dom::esc;
use crate::state::{Update, with_app};
use culturelens_results::cultext2i::{Confusion, Cultext2iRow, HEADER, dp_column};
use culturelens_view::cultext2i::row_shares;

const CELL: f64 = 46.0;
const TOP: f64 = 96.0;

/// The confusion matrix of one model as row shares.
fn matrix_svg(names: &[String], c: &Confusion, model: &str) -> String {
    let k = names.len();
    let left = names.iter().map(|n| n.chars().count()).max().unwrap_or(1) as f64 * 7.5 + 16.0;
    let (w, h) = (left + CELL * k as f64 + 8.0, TOP + CELL * k as f64 + 4.0);
    let shares = row_shares(&c.counts);
    let best: Vec<String> = names
        .iter()
        .zip(&shares)
        .filter_map(|(name, row)| {
            let (j, share) = row
                .iter()
                .enumerate()
                .filter_map(|(j, s)| s.map(|s| (j, s)))
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))?;
            Some(format!("{name} images look most {} ({share:.2})", names[j]))
        })
        .collect();
    let accuracy = c.accuracy.map_or("no accuracy".to_string(), |a| format!("accuracy {a:.2}"));
    let mut s = format!(
        "<svg id='cultext2i-svg' class='figure' data-figure width='{w:.0}' height='{h:.0}' viewBox='0 0 {w:.1} {h:.1}' \
         role='img' aria-label='NA confusion of {m} over {n} images, {accuracy}: {}'>",
        esc(&best.join("; ")),
        m = esc(model),
        n = c.n
    );
    for (j, name) in names.iter().enumerate() {
        let x = left + CELL * (j as f64 + 0.5);
        let attrs = format!("transform='rotate(-50 {x:.1} {:.1})'", TOP - 8.0);
        s.push_str(&svg_label(x, TOP - 8.0, "start", &attrs, name));
    }
    for (i, (name, row)) in names.iter().zip(&shares).enumerate() {
        let y = TOP + CELL * i as f64;
        s.push_str(&svg_label(left - 8.0, y + CELL / 2.0 + 4.0, "end", "", name));
        for (j, share) in row.iter().enumerate() {
            let x = left + CELL * j as f64;
            let count = c.counts[i][j];
            let (fill, text, rgb) = match share {
                Some(v) => {
                    let rgb = sequential_rgb(*v);
                    (css(rgb), format!("{v:.2}"), rgb)
                }
                None => ("#ddd".to_string(), "–".to_string(), [221, 221, 221]),
            };
            s.push_str(&format!(
                "<g class='na' data-true='{t}' data-predicted='{p}' data-count='{count}' data-share='{}'>\
                 <title>{t} images predicted {p}: {count} ({text})</title>\
                 <rect x='{x:.1}' y='{y:.1}' width='{cw:.1}' height='{cw:.1}' fill='{fill}'/>\
                 <text x='{:.1}' y='{:.1}' text-anchor='middle' fill='{}'>{text}</text></g>",
                share.map_or("".to_string(), |v| v.to_string()),
                x + CELL / 2.0 - 1.0,
                y + CELL / 2.0 + 4.0,
                ink(rgb),
                t = esc(name),
                p = esc(&names[j]),
                cw = CELL - 2.0,
            ));
        }
    }
    s.push_str("</svg>");
    s
}

/// The model's rows of the `--out` table, every column; open and the view's figure when there is
/// no confusion matrix (`alone`).
fn table(rows: &[Cultext2iRow], model: &str, alone: bool) -> String {
    let labels: Vec<&str> =
        rows.first().map(|r| r.dp.iter().map(|(l, _)| l.as_str()).collect()).unwrap_or_default();
    let value = |v: f64| format!("<td data-value='{v}'>{v:.3}</td>");
    let body: String = rows
        .iter()
        .filter(|r| r.model == model)
        .map(|r| {
            let dp: String = r.dp.iter().map(|(_, v)| value(*v)).collect();
            format!(
                "<tr data-model='{}'><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}{}{}{dp}</tr>",
                esc(&r.model),
                esc(&r.language),
                esc(&r.concept),
                esc(&r.template),
                r.n,
                value(r.na),
                value(r.na_acc),
                value(r.cd),
            )
        })
        .collect();
    // Every column of `cultext2i --out` but the model, which the view picks.
    let head: String = HEADER[1..]
        .iter()
        .map(|c| c.to_string())
        .chain(labels.iter().map(|l| dp_column(l)))
        .map(|c| format!("<th>{}</th>", esc(&c)))
        .collect();
    format!(
        "<details class='data'{open}><summary>Per image group ({m})</summary>\
         <table class='numbers' id='cultext2i-table' tabindex='0'{figure}><caption>CulText2I per language, concept and \
         template ({m})</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></details>",
        m = esc(model),
        open = if alone { " open" } else { "" },
        figure = if alone { " data-figure" } else { "" },
    )
}

/// Renders the view for `ui.results_model` (the first model of the tables when they lack it).
pub fn render() -> Update {
    let html = with_app(|app| {
        let (rows, report) = (app.results.cultext2i.as_deref(), app.results.cultext2i_report.as_ref());
        let models: Vec<String> = rows
            .unwrap_or_default()
            .iter()
            .map(|r| r.model.clone())
            .chain(report.map(|r| r.confusion.keys().cloned().collect::<Vec<_>>()).unwrap_or_default())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let model = pick(&models, &app.ui.results_model);
        let matrix = report.and_then(|r| r.confusion.get(&model).map(|c| (r, c)));
        let alone = matrix.is_none();
        let (accuracy, figure) = match matrix {
            Some((r, c)) => (
                c.accuracy.map_or(String::new(), |a| {
                    format!("<strong id='cultext2i-accuracy'>{}: accuracy {a:.2}</strong>", esc(&model))
                }),
                matrix_svg(&r.nationalities, c, &model),
            ),
            None => (
                String::new(),
                "<p>The bundle carries no NA confusion matrix for this model (`culturelens cultext2i --report` \
                 was not attached).</p>"
                    .to_string(),
            ),
        };
        let html = format!(
            "<h2>National association (CulText2I NA)</h2><p class='what'>Rows: the nationality the pictures were \
             meant to show; columns: the nationality text each picture is closest to. Shares of each row (bright = \
             most); the diagonal is a match.</p>\
             <div class='controls'>{accuracy}</div>{figure}{}",
            rows.map(|r| table(r, &model, alone)).unwrap_or_default(),
        );
        super::model_select(&models, &model, true);
        app.ui.results_model = model;
        Some(html)
    })
    .flatten();
    super::show_rendered("view-cultext2i", html)
}
