//! A reproduced study's report: sections of text, tables and figures, with the paper's figures
//! beside ours and a sentence on each difference, rendered as Markdown.

/// A table: the header and its rows, each cell already formatted.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self { header: header.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn markdown(&self) -> String {
        let line =
            |cells: &[String]| format!("| {} |\n", cells.iter().map(|c| escape(c)).collect::<Vec<_>>().join(" | "));
        let mut text = line(&self.header);
        text += &format!("|{}\n", "---|".repeat(self.header.len()));
        for row in &self.rows {
            text += &line(row);
        }
        text
    }
}

/// A pipe inside a cell would end it.
fn escape(cell: &str) -> String {
    cell.replace('|', "\\|")
}

/// One experiment of the study.
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub heading: String,
    /// What was run and how it maps to the paper's experiment.
    pub text: Vec<String>,
    pub tables: Vec<Table>,
    /// SVG files in the report's directory, with a caption.
    pub figures: Vec<(String, String)>,
    /// One sentence per difference between the paper's figures and ours.
    pub differences: Vec<String>,
}

impl Section {
    pub fn new(heading: &str) -> Self {
        Self { heading: heading.into(), ..Self::default() }
    }
}

/// The whole report of one study.
#[derive(Debug, Clone, Default)]
pub struct StudyReport {
    pub title: String,
    /// The paper, as cited.
    pub source: String,
    /// What the paper's figures beside ours are, and where they come from.
    pub published_note: String,
    /// The size it ran at and the machine.
    pub scale: String,
    pub sections: Vec<Section>,
    /// The commands that made the figures, in order.
    pub commands: Vec<String>,
}

impl StudyReport {
    pub fn markdown(&self) -> String {
        let mut text = format!("# {}\n\n{}\n\n{}\n\n{}\n", self.title, self.source, self.published_note, self.scale);
        for section in &self.sections {
            text += &format!("\n## {}\n\n", section.heading);
            for paragraph in &section.text {
                text += &format!("{paragraph}\n\n");
            }
            for table in &section.tables {
                text += &table.markdown();
                text += "\n";
            }
            for (file, caption) in &section.figures {
                text += &format!("![{caption}]({file})\n\n");
            }
            if !section.differences.is_empty() {
                text += "Differences from the paper:\n\n";
                for difference in &section.differences {
                    text += &format!("- {difference}\n");
                }
                text += "\n";
            }
        }
        text += "\n## Commands\n\n```sh\n";
        for command in &self.commands {
            text += &format!("{command}\n");
        }
        text += "```\n";
        text
    }
}

/// "12.3 %" for a ratio of 0.123.
pub fn percent(ratio: f64) -> String {
    if ratio.is_finite() { format!("{:.1} %", ratio * 100.0) } else { "-".into() }
}

/// A figure with three significant digits at most, thousands grouped ("1,234", "0.0123").
pub fn number(value: f64) -> String {
    if !value.is_finite() {
        return "-".into();
    }
    if value.abs() >= 1000.0 {
        let digits = format!("{:.0}", value.abs());
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        return if value < 0.0 { format!("-{grouped}") } else { grouped };
    }
    let decimals = if value == 0.0 { 0 } else { (2 - value.abs().log10().floor() as i32).clamp(0, 6) as usize };
    format!("{value:.decimals$}")
}

/// "1.5-23 %" from the lowest and highest of `ratios`.
pub fn percent_range(ratios: &[f64]) -> String {
    let finite: Vec<f64> = ratios.iter().copied().filter(|r| r.is_finite()).collect();
    if finite.is_empty() {
        return "-".into();
    }
    let (lo, hi) = (finite.iter().copied().fold(f64::MAX, f64::min), finite.iter().copied().fold(f64::MIN, f64::max));
    format!("{}-{} %", number(lo * 100.0), number(hi * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_three_significant_digits_and_group_thousands() {
        assert_eq!(number(1234567.0), "1,234,567");
        assert_eq!(number(999.4), "999");
        assert_eq!(number(12.345), "12.3");
        assert_eq!(number(0.012345), "0.0123");
        assert_eq!(number(0.0), "0");
        assert_eq!(percent(0.123), "12.3 %");
        assert_eq!(percent_range(&[0.015, 0.23, f64::NAN]), "1.50-23.0 %");
    }

    #[test]
    fn a_report_renders_its_tables_figures_and_differences() {
        let mut section = Section::new("IO500");
        let mut table = Table::new(&["phase", "ours"]);
        table.row(vec!["a|b".into(), "1".into()]);
        section.tables.push(table);
        section.figures.push(("radar.svg".into(), "phases".into()));
        section.differences.push("two cores, not Mistral".into());
        let report = StudyReport {
            title: "T".into(),
            sections: vec![section],
            commands: vec!["isthmus x".into()],
            ..Default::default()
        };
        let text = report.markdown();
        assert!(text.contains("| phase | ours |\n|---|---|\n| a\\|b | 1 |"), "{text}");
        assert!(text.contains("![phases](radar.svg)"));
        assert!(text.contains("- two cores, not Mistral"));
        assert!(text.contains("```sh\nisthmus x\n```"));
    }
}
