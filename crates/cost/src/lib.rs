//! `isthmus cost`: what a storage deployment costs over time, in the cloud (pay-as-you-go) and
//! on premises (buy and run), with the break-even month, its sensitivity to the main inputs,
//! and cost per unit of measured performance, under the published equations or the project's
//! refinement of them (`CostModel`).

pub mod model;
pub mod perf;
pub mod report;

pub use model::{Cloud, CloudPrices, CloudUsage, Comparison, CostModel, LoadBalancer, OnPrem, Scenario};
pub use report::{KeyFigures, YearTotal, key_figures, preset_key_figures};

/// Errors of scenario loading and model choice.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    #[error("unknown preset {0:?}: use budget, standard or high")]
    UnknownPreset(String),
    #[error("unknown cost model {0:?}: use paper or refined")]
    UnknownModel(String),
    #[error("{path}: {message}")]
    Scenario { path: String, message: String },
}

/// The shipped presets: the three published configurations.
pub const PRESETS: [(&str, &str); 3] = [
    ("budget", include_str!("../scenarios/budget.toml")),
    ("standard", include_str!("../scenarios/standard.toml")),
    ("high", include_str!("../scenarios/high.toml")),
];

pub fn preset(name: &str) -> Result<Scenario, CostError> {
    let text = PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| CostError::UnknownPreset(name.into()))?;
    parse(name, text)
}

/// Parses a scenario file's text; `origin` names it in errors.
pub fn parse(origin: &str, text: &str) -> Result<Scenario, CostError> {
    toml::from_str(text).map_err(|e| CostError::Scenario { path: origin.into(), message: e.message().to_string() })
}

pub fn load(path: &std::path::Path) -> Result<Scenario, CostError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CostError::Scenario { path: path.display().to_string(), message: e.to_string() })?;
    parse(&path.display().to_string(), &text)
}
