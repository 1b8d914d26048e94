//! Gender bias per language (MAGBIG §4–5, Fig. 5), from the `culturelens magbig` table a bundle
//! carries: for one model, MAD per language (x axis, name order) and prompt set (one bar each,
//! name order, Okabe–Ito colours) with the fair-coin baseline `mad_random` as a dashed tick across
//! its bar, as `culturelens figures` draws `magbig_MODEL` (`culturelens_view::magbig::chart`).
//! Every bar carries its table row in full precision (`data-mad`, `data-mad-random`,
//! `data-male-share`, `data-n-prompts`, `data-n-images`), is reachable with Tab and shows its
//! numbers on focus or hover (with the table's bootstrap intervals, `data-mad-lo` … when `magbig
//! --ci` wrote them); the numbers table under the chart lists the same rows.

use super::colour::{category, css};
use super::{pick, svg_label};
use crate::dom::esc;
use crate::state::{Update, with_app};
use culturelens_results::ci::Interval;
use culturelens_results::magbig::{HEADER, MagbigRow};
use culturelens_view::magbig::{Chart, Row, chart, models};

const BAR_W: f64 = 22.0;
const GROUP_GAP: f64 = 16.0;
const LEFT: f64 = 56.0;
const TOP: f64 = 12.0;
const PLOT_H: f64 = 260.0;

/// A number as the CLI wrote it (shortest round-trip form), for `data-` attributes.
fn full(v: f64) -> String {
    v.to_string()
}

/// The chart's SVG: y axis, one bar per (language, set) with its baseline tick, language labels.
fn chart_svg(c: &Chart, rows: &[MagbigRow], model: &str) -> String {
    let group_w = BAR_W * c.sets.len() as f64 + GROUP_GAP;
    let plot_w = group_w * c.languages.len() as f64;
    let rotate = c.languages.iter().any(|l| l.chars().count() as f64 * 7.5 > group_w);
    let label_h = if rotate {
        c.languages.iter().map(|l| l.chars().count()).max().unwrap_or(1) as f64 * 6.0 + 16.0
    } else {
        24.0
    };
    let (w, h) = (LEFT + plot_w + 8.0, TOP + PLOT_H + label_h + 22.0);
    let y = |v: f64| TOP + PLOT_H * (1.0 - v / c.axis.top);
    let summary: Vec<String> = c
        .languages
        .iter()
        .zip(&c.bars)
        .map(|(l, bars)| {
            let sets: Vec<String> = c
                .sets
                .iter()
                .zip(bars)
                .filter_map(|(s, b)| b.map(|i| format!("{s} {:.2}", rows[i].mad)))
                .collect();
            format!("{l}: {}", sets.join(", "))
        })
        .collect();
    let mut s = format!(
        "<svg id='magbig-svg' class='figure' data-figure width='{w}' height='{h}' viewBox='0 0 {w} {h}' role='group' \
         aria-label='MAD per language and prompt set for {m}, with the fair-coin baseline. {}'>",
        esc(&summary.join("; ")),
        m = esc(model)
    );
    let decimals = c.axis.decimals();
    for t in c.axis.ticks() {
        let ty = y(t);
        s.push_str(&format!(
            "<line x1='{LEFT}' x2='{:.1}' y1='{ty:.2}' y2='{ty:.2}' class='gridline' data-value='{t}'/>",
            LEFT + plot_w
        ));
        s.push_str(&svg_label(LEFT - 6.0, ty + 4.0, "end", "", &format!("{t:.decimals$}")));
    }
    s.push_str(&format!(
        "<text x='12' y='{:.1}' text-anchor='middle' transform='rotate(-90 12 {:.1})'>MAD</text>",
        TOP + PLOT_H / 2.0,
        TOP + PLOT_H / 2.0
    ));
    for (g, (language, bars)) in c.languages.iter().zip(&c.bars).enumerate() {
        let gx = LEFT + g as f64 * group_w + GROUP_GAP / 2.0;
        for (k, bar) in bars.iter().enumerate() {
            let Some(i) = *bar else { continue };
            let r = &rows[i];
            let x = gx + k as f64 * BAR_W;
            // The bootstrap intervals of a table written by `magbig --ci`.
            let interval = |i: Option<Interval>| {
                i.map_or_else(|| "undefined".to_string(), |i| format!("[{:.3}, {:.3}]", i.lo, i.hi))
            };
            let (ci_tip, ci_attrs) = if r.mad_ci.is_some() || r.male_share_ci.is_some() {
                let attrs: String = [("mad", r.mad_ci), ("male-share", r.male_share_ci)]
                    .iter()
                    .filter_map(|(name, i)| {
                        i.map(|i| format!(" data-{name}-lo='{}' data-{name}-hi='{}'", full(i.lo), full(i.hi)))
                    })
                    .collect();
                let tip = format!(
                    "; bootstrap intervals (magbig --ci): MAD {}, male share {}",
                    interval(r.mad_ci),
                    interval(r.male_share_ci)
                );
                (tip, attrs)
            } else {
                (String::new(), String::new())
            };
            let tip = format!(
                "{language}, {}: MAD {:.3} (fair coin {:.3}), male share {:.3}; {} prompts, {} images{ci_tip}",
                r.set, r.mad, r.mad_random, r.male_share, r.n_prompts, r.n_images
            );
            let (top, base) = (y(r.mad), y(r.mad_random));
            s.push_str(&format!(
                "<g class='bar' tabindex='0' role='img' aria-label='{tip}' data-tip='{tip}' data-model='{m}' \
                 data-language='{l}' data-set='{set}' data-mad='{}' data-mad-random='{}' data-male-share='{}' \
                 data-n-prompts='{}' data-n-images='{}'{ci_attrs}>\
                 <rect x='{:.1}' y='{top:.2}' width='{:.1}' height='{:.2}' fill='{}' stroke='#333'/>\
                 <line class='baseline-under' x1='{x:.1}' x2='{x2:.1}' y1='{base:.2}' y2='{base:.2}'/>\
                 <line class='baseline' x1='{x:.1}' x2='{x2:.1}' y1='{base:.2}' y2='{base:.2}'/></g>",
                full(r.mad),
                full(r.mad_random),
                full(r.male_share),
                r.n_prompts,
                r.n_images,
                x + 1.0,
                BAR_W - 2.0,
                (y(0.0) - top).max(0.0),
                css(category(k)),
                tip = esc(&tip),
                m = esc(model),
                l = esc(language),
                set = esc(&r.set),
                x2 = x + BAR_W,
            ));
        }
        let cx = gx + BAR_W * c.sets.len() as f64 / 2.0;
        let ly = TOP + PLOT_H + 16.0;
        if rotate {
            s.push_str(&svg_label(
                cx,
                ly,
                "end",
                &format!("transform='rotate(-45 {cx:.1} {ly:.1})'"),
                language,
            ));
        } else {
            s.push_str(&svg_label(cx, ly, "middle", "", language));
        }
    }
    s.push_str(&format!(
        "<line x1='{LEFT}' x2='{:.1}' y1='{b:.1}' y2='{b:.1}' stroke='#333'/>",
        LEFT + plot_w,
        b = y(0.0)
    ));
    s.push_str(&svg_label(LEFT + plot_w / 2.0, h - 6.0, "middle", "", "prompt language"));
    s.push_str("</svg>");
    s
}

/// The legend: one colour per set, and the baseline tick.
fn legend(c: &Chart) -> String {
    let sets: String = c
        .sets
        .iter()
        .enumerate()
        .map(|(k, s)| {
            format!("<span class='key'><i style='background:{}'></i>{}</span>", css(category(k)), esc(s))
        })
        .collect();
    format!("<p class='legend-row'>{sets}<span class='key'><i class='dash'></i>fair-coin baseline</span></p>")
}

/// The numbers table of the model's rows (every column of the CLI's table).
fn table(rows: &[MagbigRow], model: &str) -> String {
    let body: String = rows
        .iter()
        .filter(|r| r.model == model)
        .map(|r| {
            format!(
                "<tr data-model='{}' data-language='{l}' data-set='{s}'><td>{l}</td><td>{s}</td><td>{}</td><td>{}</td>\
                 <td data-value='{}'>{:.3}</td><td data-value='{}'>{:.3}</td><td data-value='{}'>{:.3}</td></tr>",
                esc(&r.model),
                r.n_prompts,
                r.n_images,
                full(r.mad),
                r.mad,
                full(r.mad_random),
                r.mad_random,
                full(r.male_share),
                r.male_share,
                l = esc(&r.language),
                s = esc(&r.set),
            )
        })
        .collect();
    // Every column of `magbig --out` but the model, which the view picks.
    let head: String = HEADER[1..].iter().map(|c| format!("<th>{c}</th>")).collect();
    format!(
        "<details class='data'><summary>Numbers of {m}</summary>\
         <table class='numbers' id='magbig-table' tabindex='0'><caption>MAGBIG per language and set ({m})</caption>\
         <thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></details>",
        m = esc(model)
    )
}

/// Renders the view for `ui.results_model` (the table's first model when it has no rows); the
/// model chosen is written back to the URL.
pub fn render() -> Update {
    let html = with_app(|app| {
        let rows = app.results.magbig.as_ref()?;
        let plain: Vec<Row<'_>> = rows
            .iter()
            .map(|r| Row { model: &r.model, language: &r.language, set: &r.set, mad: r.mad, mad_random: r.mad_random })
            .collect();
        let all = models(&plain);
        let model = pick(&all, &app.ui.results_model);
        let c = chart(&plain, &model)?;
        let html = format!(
            "<h2>Gender bias per language (MAGBIG)</h2><p class='what'>MAD: how far each prompt's pictures are from half \
             men, half women (0 = equal, 1 = all one gender), averaged over the prompts of a set. The dashed tick is what \
             fair coin flips would give with the same numbers of images.</p>{}{}{}",
            legend(&c),
            chart_svg(&c, rows, &model),
            table(rows, &model),
        );
        super::model_select(&all, &model, true);
        app.ui.results_model = model;
        Some(html)
    })
    .flatten();
    super::show_rendered("view-magbig", html)
}
