//! Educator mode: a projector-friendly slide for one culture and person term, showing every
//! language side by side (the images when the bundle has thumbnails, otherwise the scores) with
//! their SoS. ←/→ change the culture, ↑/↓ the person term, `m` the model; `F` (or the header's
//! Present button) enters presentation mode — the slide alone, fullscreen, large type — and `F`
//! or `Esc` leaves it (`culturelens_view::present`). The whole slide is in the URL
//! (`view=educator&model=…&culture=…&person=…&present=1`), so a teacher can bookmark or share it.
//! The values come from `culturelens_view::educator::cards`; each card carries them in full
//! precision (`data-sos`: mean per-output SoS, `data-n`, `data-joint`: the cell's joint score).
//!
//! When the bundle carries a MAGBIG attribute table, the occupation slide (`slide=gender`) shows
//! one occupation of one prompt set across languages instead, with the share of its images
//! perceived as male (MAGBIG §4: `#male / (#male + #female)`, the core's
//! `PromptCounts::male_share`; images without a face are counted apart). The same keys move the
//! occupation (←/→), the set (↑/↓) and the model (`m`); each card carries `data-male`,
//! `data-female`, `data-unclassified` and `data-male-share`.

use culturelens_metrics::magbig::PromptCounts;
use culturelens_results::magbig::ATTRIBUTE_COLUMNS;
use culturelens_view::educator::{Columns, Slide as SosSlide, cards, distinct};
use culturelens_view::magbig::{Attributes, occupation_cards, occupation_column};
use culturelens_view::present::{self, Choices, Command};
use wasm_bindgen::JsCast;
use web_sys::Event;

use super::colour::{css, diverging_rgb, ink};
use super::{Handler, Listen, pick, select};
use crate::dom::{self, esc};
use crate::load;
use crate::state::{App, Slide, Update, with_app};

/// Images per language on a slide.
const IMAGES_PER_LANGUAGE: usize = 4;

pub fn handlers() -> [Handler; 3] {
    [
        Handler { on: Listen::Document, event: "keydown", run: on_key },
        Handler { on: Listen::Document, event: "fullscreenchange", run: on_fullscreen_change },
        Handler { on: Listen::Id("view-educator"), event: "change", run: on_select },
    ]
}

/// Keys of the slide and of presentation mode (`culturelens_view::present`); ignored while typing
/// in a form field.
fn on_key(e: &Event) -> Update {
    let Some(k) = e.dyn_ref::<web_sys::KeyboardEvent>() else { return Update::Nothing };
    if k.ctrl_key() || k.meta_key() || k.alt_key() {
        return Update::Nothing;
    }
    let typing = e
        .target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "SELECT" | "TEXTAREA"));
    if typing {
        return Update::Nothing;
    }
    let key = k.key();
    let Some(Some(command)) = with_app(|app| present::command(&key, &app.ui)) else { return Update::Nothing };
    e.prevent_default();
    run(command)
}

/// The header's "Present" button: presentation mode on.
pub fn on_present_button(_: &Event) -> Update {
    run(Command::TogglePresent)
}

/// Leaving fullscreen (the browser's own `Esc`) leaves presentation mode too.
fn on_fullscreen_change(_: &Event) -> Update {
    let presenting = with_app(|app| app.ui.present).unwrap_or(false);
    if presenting && !dom::is_fullscreen() { run(Command::Leave) } else { Update::Nothing }
}

/// The attribute table's columns as the occupation slide reads them.
fn attributes(a: &load::Attributes) -> Option<Attributes<'_>> {
    let names: Vec<&str> = a.columns.iter().map(|(n, _)| n.as_str()).collect();
    let [model, language, set, ..] = ATTRIBUTE_COLUMNS;
    Some(Attributes {
        model: a.column(model)?,
        language: a.column(language)?,
        set: a.column(set)?,
        occupation: a.column(occupation_column(&names))?,
        is_male: &a.is_male,
    })
}

/// The occupation slide's choices in the current state: models, sets of the model, occupations
/// of the set; the model, set and occupation of `ui` replaced by the first choice when absent.
fn gender_choices(app: &mut App) -> Option<(Vec<String>, Vec<String>, Vec<String>)> {
    let a = attributes(app.results.attributes.as_ref()?)?;
    let models = distinct(a.model);
    let ui = &mut app.ui;
    ui.results_model = pick(&models, &ui.results_model);
    let sets = a.sets(&ui.results_model);
    ui.set = pick(&sets, &ui.set);
    let occupations = a.occupations(&ui.results_model, &ui.set);
    ui.occupation = pick(&occupations, &ui.occupation);
    Some((models, sets, occupations))
}

/// Applies a command to the UI state; entering presentation mode asks for fullscreen (refused
/// fullscreen, e.g. without a user gesture, still presents in the window).
fn run(command: Command) -> Update {
    let present = with_app(|app| {
        let options = |name: &str| app.column(name).map(distinct).unwrap_or_default();
        let (cultures, persons) = (options("culture"), options("person"));
        let (results_models, sets, occupations) = match app.ui.slide {
            Slide::Gender => gender_choices(app).unwrap_or_default(),
            Slide::Sos => Default::default(),
        };
        let choices = Choices {
            cultures: &cultures,
            persons: &persons,
            models: &app.manifest.models,
            occupations: &occupations,
            sets: &sets,
            results_models: &results_models,
        };
        present::apply(&mut app.ui, command, choices);
        app.ui.present
    });
    match (command, present) {
        (Command::TogglePresent, Some(true)) => dom::set_fullscreen(true),
        (Command::TogglePresent | Command::Leave, Some(false)) => dom::set_fullscreen(false),
        _ => {}
    }
    Update::Render
}

fn on_select(e: &Event) -> Update {
    let Some(sel) = e.target().and_then(|t| t.dyn_into::<web_sys::HtmlSelectElement>().ok()) else {
        return Update::Nothing;
    };
    let value = sel.value();
    with_app(|app| match sel.id().as_str() {
        "edu-slide" => app.ui.slide = Slide::parse(Some(&value)),
        "edu-culture" => app.ui.culture = value,
        "edu-person" => app.ui.person = value,
        "edu-set" => app.ui.set = value,
        "edu-occupation" => app.ui.occupation = value,
        _ => {}
    });
    Update::Render
}

/// The slide chooser, when the bundle has an occupation slide.
fn slide_select(app: &App) -> String {
    if app.results.attributes.is_none() {
        return String::new();
    }
    let option = |slide: Slide, text: &str| {
        format!(
            "<option value='{}'{}>{text}</option>",
            slide.param(),
            if app.ui.slide == slide { " selected" } else { "" }
        )
    };
    format!(
        "<label>Slide <select id='edu-slide'>{}{}</select></label>",
        option(Slide::Sos, "culture (SoS)"),
        option(Slide::Gender, "occupation (gender)")
    )
}

/// Renders the slide the URL asks for (the SoS slide when the bundle has no attribute table); a
/// choice not in the bundle is replaced by the first one, so the URL is written back.
pub fn render() -> Update {
    let html = with_app(|app| {
        if app.results.attributes.is_none() {
            app.ui.slide = Slide::Sos;
        }
        match app.ui.slide {
            Slide::Sos => sos_slide(app),
            Slide::Gender => gender_slide(app),
        }
    })
    .flatten();
    super::show_rendered("view-educator", html)
}

/// The occupation slide: one card per language with the male share of the occupation's images.
fn gender_slide(app: &mut App) -> Option<String> {
    let (models, sets, occupations) = gender_choices(app)?;
    let a = attributes(app.results.attributes.as_ref()?)?;
    let ui = &app.ui;
    // The header's model selector lists the attribute table's models on this slide.
    super::model_select(&models, &ui.results_model, true);
    let mut html = String::new();
    let mut summary = Vec::new();
    for card in occupation_cards(a, &ui.results_model, &ui.set, &ui.occupation) {
        let share = PromptCounts { male: card.male, female: card.female }.male_share();
        let l = esc(&card.language);
        summary.push(format!(
            "{} {}",
            card.language,
            share.map_or("no face".to_string(), |s| format!("{s:.2}"))
        ));
        let (shown, bar) = match share {
            Some(p) => (
                format!("{:.0}% male", 100.0 * p),
                format!(
                    "<svg class='share-bar' viewBox='0 0 100 10' preserveAspectRatio='none' aria-hidden='true'>\
                     <rect width='{m:.3}' height='10' fill='#0072b2'/><rect x='{m:.3}' width='{f:.3}' height='10' fill='#e69f00'/></svg>",
                    m = 100.0 * p,
                    f = 100.0 * (1.0 - p)
                ),
            ),
            None => ("no face found".to_string(), String::new()),
        };
        html.push_str(&format!(
            "<section class='edu-card gender-card' data-language='{l}' data-male='{}' data-female='{}' \
             data-unclassified='{}' data-male-share='{}'><h3>{l}</h3><div class='edu-share'>{shown}</div>{bar}\
             <p class='muted'>{} male · {} female · {} without a face</p></section>",
            card.male,
            card.female,
            card.unclassified,
            share.map_or(String::new(), |p| p.to_string()),
            card.male,
            card.female,
            card.unclassified,
        ));
    }
    let label = format!(
        "Share of images perceived as male per language for {} ({}, {}): {}",
        ui.occupation,
        ui.set,
        ui.results_model,
        summary.join(", ")
    );
    Some(format!(
        "<div class='edu-controls'>{}{}{}</div><h2 class='edu-title'>{} · {} · {}</h2>\
         <p class='what'>The same occupation prompted in every language: the share of its pictures perceived as male \
         (blue) rather than female (orange); pictures without a face are left out. Keys: ←/→ occupation · ↑/↓ prompt \
         set · m model · F present.</p>\
         <div class='edu-row' data-figure role='group' aria-label='{label}'>{html}</div>\
         <p class='present-hint'>←/→ occupation · ↑/↓ prompt set · m model · Esc leaves</p>",
        slide_select(app),
        select("edu-set", "Set", &sets, &ui.set),
        select("edu-occupation", "Occupation", &occupations, &ui.occupation),
        esc(&ui.occupation),
        esc(&ui.set),
        esc(&ui.results_model),
        label = esc(&label),
    ))
}

/// The SoS slide: one card per language with the mean SoS of its outputs.
fn sos_slide(app: &mut App) -> Option<String> {
    let cultures = app.column("culture").map(distinct).unwrap_or_default();
    let persons = app.column("person").map(distinct).unwrap_or_default();
    if !cultures.contains(&app.ui.culture) {
        app.ui.culture = cultures.first().cloned().unwrap_or_default();
    }
    if !persons.is_empty() && !persons.contains(&app.ui.person) {
        app.ui.person = persons.first().cloned().unwrap_or_default();
    }
    let scored = app.scored.as_ref()?;
    let cols = Columns {
        model: app.column("model")?,
        language: app.column("language")?,
        culture: app.column("culture")?,
        person: app.column("person"),
    };
    let thumbs = app.column(culturelens_bundle::THUMBNAIL_COLUMN);
    let ui = &app.ui;
    let slide = SosSlide { model: &ui.model, culture: &ui.culture, person: &ui.person };
    let mut html = String::new();
    let mut summary = Vec::new();
    for card in cards(&scored.rows, &scored.per_image, cols, slide) {
        let joint = scored
            .report
            .joint
            .iter()
            .find(|j| j.model == ui.model && j.language == card.language && j.culture == ui.culture)
            .map(|j| j.sos);
        summary.push(format!("{} {:.2}", card.language, card.mean));
        let rgb = diverging_rgb(card.mean, 0.5);
        let images: String = match thumbs {
            Some(t) => card
                .outputs
                .iter()
                .filter(|(r, _)| !t[*r].is_empty())
                .take(IMAGES_PER_LANGUAGE)
                .map(|(r, s)| {
                    format!(
                        "<figure><img src='{}' alt='{}'><figcaption>{s:.3}</figcaption></figure>",
                        esc(&app.thumbs.url(&t[*r])),
                        esc(&format!("{} {} in {}", ui.culture, ui.person, card.language))
                    )
                })
                .collect(),
            None => card.outputs.iter().map(|(_, s)| format!("<span class='score'>{s:.3}</span>")).collect(),
        };
        html.push_str(&format!(
            "<section class='edu-card' data-language='{l}' data-sos='{mean}' data-n='{n}' data-joint='{joint_value}'><h3>{l}</h3>\
             <div class='edu-sos' style='background:{bg};color:{fg}'>SoS {mean:.3}</div>\
             <div class='edu-images'>{images}</div>\
             <p class='muted'>n = {n}; cell (all person terms) {joint}</p></section>",
            l = esc(&card.language),
            mean = card.mean,
            bg = css(rgb),
            fg = ink(rgb),
            n = card.outputs.len(),
            joint_value = joint.map_or("".to_string(), |j| j.to_string()),
            joint = joint.map_or("–".to_string(), |j| format!("{j:.3}"))
        ));
    }
    let label = format!(
        "Mean SoS per language for {} {} ({}): {}",
        ui.culture,
        ui.person,
        ui.model,
        summary.join(", ")
    );
    let person_select =
        if persons.is_empty() { String::new() } else { select("edu-person", "Person", &persons, &ui.person) };
    Some(format!(
        "<div class='edu-controls'>{}{}{}</div><h2 class='edu-title'>{} · {} · {}</h2>\
         <p class='what'>The same prompt in every language, side by side. Orange = the pictures look like their \
         language (surface), purple = like the culture asked for (semantics). Keys: ←/→ culture · ↑/↓ person term · \
         m model · F present.</p>\
         <div class='edu-row' data-figure role='group' aria-label='{label}'>{html}</div>\
         <p class='present-hint'>←/→ culture · ↑/↓ person term · m model · Esc leaves</p>",
        slide_select(app),
        select("edu-culture", "Culture", &cultures, &ui.culture),
        person_select,
        esc(&ui.culture),
        esc(&ui.person),
        esc(&ui.model),
        label = esc(&label),
    ))
}
