//! Keyboard control of the educator slide and of presentation mode: which key does what, and
//! the new UI state it leads to. `F` enters presentation mode (the educator slide alone, chrome
//! hidden, fullscreen) from any view and leaves it again; `Esc` leaves it; on the SoS slide ←/→
//! (and a presenter remote's PageUp/PageDown) change the culture, ↑/↓ the person term, `m` the
//! model; on the occupation slide (`slide=gender`) the same keys change the occupation, the prompt
//! set and the result tables' model. The state lands in the URL
//! (`view=educator&present=1&culture=…`), so a slide is bookmarkable.

use crate::educator::step;
use crate::url::{Slide, Ui};

/// What a key asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Enter presentation mode, or leave it when presenting (`F`).
    TogglePresent,
    /// Leave presentation mode (`Esc`).
    Leave,
    /// Move the slide's main choice by ±1 (←/→): the culture, or the occupation.
    Across(i64),
    /// Move its second choice by ±1 (↑/↓): the person term, or the prompt set.
    Down(i64),
    /// The next model.
    Model,
}

/// The command of `key` (a `KeyboardEvent.key`) in `ui`'s state, if any: slide navigation only on
/// the educator view, `Esc` only while presenting.
pub fn command(key: &str, ui: &Ui) -> Option<Command> {
    match key {
        "f" | "F" => Some(Command::TogglePresent),
        "Escape" if ui.present => Some(Command::Leave),
        _ if ui.view != "educator" => None,
        "ArrowRight" | "PageDown" => Some(Command::Across(1)),
        "ArrowLeft" | "PageUp" => Some(Command::Across(-1)),
        "ArrowDown" => Some(Command::Down(1)),
        "ArrowUp" => Some(Command::Down(-1)),
        "m" | "M" => Some(Command::Model),
        _ => None,
    }
}

/// The choices a slide moves through (sorted distinct values): those of the SoS slide, and
/// those of the occupation slide in the current model and set.
#[derive(Clone, Copy, Debug)]
pub struct Choices<'a> {
    pub cultures: &'a [String],
    pub persons: &'a [String],
    pub models: &'a [String],
    pub occupations: &'a [String],
    pub sets: &'a [String],
    pub results_models: &'a [String],
}

/// Applies `command` to `ui`. Entering presentation mode shows the educator slide; leaving it
/// keeps the slide on screen, with the chrome back.
pub fn apply(ui: &mut Ui, command: Command, choices: Choices<'_>) {
    match command {
        Command::TogglePresent => {
            ui.present = !ui.present;
            if ui.present {
                ui.view = "educator".into();
            }
        }
        Command::Leave => ui.present = false,
        Command::Across(d) => match ui.slide {
            Slide::Sos => ui.culture = step(choices.cultures, &ui.culture, d),
            Slide::Gender => ui.occupation = step(choices.occupations, &ui.occupation, d),
        },
        Command::Down(d) => match ui.slide {
            Slide::Sos => ui.person = step(choices.persons, &ui.person, d),
            Slide::Gender => ui.set = step(choices.sets, &ui.set, d),
        },
        Command::Model => match ui.slide {
            Slide::Sos => ui.model = step(choices.models, &ui.model, 1),
            Slide::Gender => ui.results_model = step(choices.results_models, &ui.results_model, 1),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ui(view: &str, present: bool) -> Ui {
        let views = crate::url::views_for(true, true);
        let mut ui = Ui::from_params(|_| None, &["m1".to_string(), "m2".to_string()], &views);
        ui.view = view.into();
        ui.present = present;
        ui
    }

    #[test]
    fn keys_map_to_commands_by_state() {
        let (heatmap, slide, presenting) =
            (ui("heatmap", false), ui("educator", false), ui("educator", true));
        assert_eq!(command("f", &heatmap), Some(Command::TogglePresent));
        assert_eq!(command("F", &presenting), Some(Command::TogglePresent));
        assert_eq!(command("Escape", &presenting), Some(Command::Leave));
        assert_eq!(command("Escape", &slide), None);
        assert_eq!(command("ArrowRight", &heatmap), None, "arrows belong to the other views elsewhere");
        assert_eq!(command("ArrowRight", &slide), Some(Command::Across(1)));
        assert_eq!(command("PageUp", &presenting), Some(Command::Across(-1)));
        assert_eq!(command("ArrowDown", &presenting), Some(Command::Down(1)));
        assert_eq!(command("ArrowUp", &slide), Some(Command::Down(-1)));
        assert_eq!(command("m", &slide), Some(Command::Model));
        assert_eq!(command("x", &presenting), None);
    }

    #[test]
    fn commands_change_the_state() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let (cultures, persons, models) = (s(&["A", "B", "C"]), s(&["man", "woman"]), s(&["m1", "m2"]));
        let (occupations, sets, results_models) =
            (s(&["nurse", "pilot"]), s(&["direct", "indirect"]), s(&["ad", "mf", "sd"]));
        let choices = Choices {
            cultures: &cultures,
            persons: &persons,
            models: &models,
            occupations: &occupations,
            sets: &sets,
            results_models: &results_models,
        };
        let mut u = ui("heatmap", false);
        u.culture = "A".into();
        u.person = "man".into();
        apply(&mut u, Command::TogglePresent, choices);
        assert!(u.present);
        assert_eq!(u.view, "educator");
        apply(&mut u, Command::Across(-1), choices);
        assert_eq!(u.culture, "C");
        apply(&mut u, Command::Down(1), choices);
        assert_eq!(u.person, "woman");
        apply(&mut u, Command::Model, choices);
        assert_eq!(u.model, "m2");
        apply(&mut u, Command::Leave, choices);
        assert!(!u.present);
        assert_eq!((u.view.as_str(), u.culture.as_str()), ("educator", "C"));
        apply(&mut u, Command::TogglePresent, choices);
        apply(&mut u, Command::TogglePresent, choices);
        assert!(!u.present);
        // The occupation slide: the same keys move its own choices, the SoS slide's stay.
        u.slide = Slide::Gender;
        apply(&mut u, Command::Across(1), choices);
        assert_eq!(u.occupation, "pilot", "from no occupation to the second");
        apply(&mut u, Command::Across(1), choices);
        assert_eq!(u.occupation, "nurse");
        apply(&mut u, Command::Down(-1), choices);
        assert_eq!(u.set, "indirect");
        apply(&mut u, Command::Model, choices);
        assert_eq!(u.results_model, "mf");
        assert_eq!((u.culture.as_str(), u.person.as_str(), u.model.as_str()), ("C", "woman", "m2"));
    }
}
