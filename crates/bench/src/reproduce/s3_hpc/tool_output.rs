//! Reading what the community's tools print: IOR's "Summary of all tests" table, mdtest's
//! "SUMMARY rate" table and MD-Workbench's phase lines, each tool's version, and the problems a
//! run reports (a read check's errors, a failed S3 call as IOR's S3-libs3 backend warns of it).

/// One phase a tool measured, named in the IO500's words (`write`, `read`, `stat`, `delete`, or
/// MD-Workbench's `precreate`, `benchmark`, `cleanup`).
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub name: String,
    /// MiB/s for IOR, operations per second for mdtest and MD-Workbench.
    pub figure: f64,
    /// MD-Workbench: the median time per operation in seconds, per operation kind.
    pub medians: Vec<(String, f64)>,
}

/// What one run of a tool printed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// The tool's version as it prints it (`4.1.0+dev`).
    pub version: Option<String>,
    pub phases: Vec<Phase>,
    /// What went wrong: a read check's errors, a failed S3 call; empty when the run was clean.
    pub problems: Vec<String>,
}

/// The text after `marker` up to the first character `end` accepts.
fn after<'a>(text: &'a str, marker: &str, end: impl Fn(char) -> bool) -> Option<&'a str> {
    let start = text.find(marker)? + marker.len();
    let rest = &text[start..];
    Some(&rest[..rest.find(end).unwrap_or(rest.len())])
}

fn phase(name: &str, figure: f64) -> Phase {
    Phase { name: name.into(), figure, medians: Vec::new() }
}

/// IOR: the mean MiB/s of `write` and `read` from the summary table, columns found by their
/// header (the table has grown columns between IOR versions).
pub fn parse_ior(text: &str) -> Result<ToolOutput, String> {
    let version = after(text, "IOR-", |c: char| c == ':' || c.is_whitespace()).map(str::to_string);
    let mut lines = text.lines().skip_while(|l| !l.starts_with("Summary of all tests:")).skip(1);
    let header: Vec<&str> =
        lines.next().ok_or("IOR printed no \"Summary of all tests\" table")?.split_whitespace().collect();
    let column = |name: &str| header.iter().position(|h| *h == name);
    let (Some(0), Some(mean)) = (column("Operation"), column("Mean(MiB)")) else {
        return Err(format!("IOR's summary table has no Operation and Mean(MiB) columns: {}", header.join(" ")));
    };
    let mut phases = Vec::new();
    for cells in lines.map(|l| l.split_whitespace().collect::<Vec<_>>()) {
        match cells.first() {
            Some(&op @ ("write" | "read")) if cells.len() == header.len() => {
                let figure =
                    cells[mean].parse().map_err(|_| format!("IOR's {op} row has no number: {}", cells[mean]))?;
                if !phases.iter().any(|p: &Phase| p.name == op) {
                    phases.push(phase(op, figure));
                }
            }
            _ => break,
        }
    }
    if phases.is_empty() {
        return Err("IOR's summary table has no write or read row".into());
    }
    Ok(ToolOutput { version, phases, problems: problems(text) })
}

/// mdtest: the mean operations per second of the file phases from the "SUMMARY rate" table.
pub fn parse_mdtest(text: &str) -> Result<ToolOutput, String> {
    let version = after(text, "mdtest-", char::is_whitespace).map(str::to_string);
    let rows = text
        .lines()
        .skip_while(|l| !l.starts_with("SUMMARY rate"))
        .skip(1)
        .skip_while(|l| !l.trim_start().starts_with("---------"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("--") && !l.starts_with("SUMMARY"));
    let mut phases = Vec::new();
    for line in rows {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() < 5 {
            break;
        }
        let (name, numbers) = words.split_at(words.len() - 4);
        let mean: f64 = numbers[2].parse().map_err(|_| format!("mdtest's row has no number: {line}"))?;
        let name = match name.join(" ").as_str() {
            "File creation" => "write",
            "File stat" => "stat",
            "File read" => "read",
            "File removal" => "delete",
            _ => continue,
        };
        phases.push(phase(name, mean));
    }
    if phases.is_empty() {
        return Err("mdtest printed no \"SUMMARY rate\" table with file phases".into());
    }
    Ok(ToolOutput { version, phases, problems: problems(text) })
}

/// One MD-Workbench phase's lines: the rates and the per-kind medians of each.
struct Lines<'a> {
    name: &'a str,
    rates: Vec<f64>,
    medians: Vec<(String, f64)>,
}

/// MD-Workbench: each phase's rate in operations per second (the mean over the benchmark's
/// iterations), and the benchmark's median time per operation kind (the median of the
/// iterations' medians). Its own count of errors is a problem.
pub fn parse_md_workbench(text: &str) -> Result<ToolOutput, String> {
    let version = after(text, "(version: ", |c| c == ')').map(str::to_string);
    let mut out = ToolOutput { version, ..ToolOutput::default() };
    let mut phases: Vec<Lines> = Vec::new();
    for line in text.lines() {
        let Some(name) =
            ["precreate", "benchmark", "cleanup"].into_iter().find(|p| line.starts_with(&format!("{p} process")))
        else {
            continue;
        };
        let rate = after(line, "rate:", char::is_whitespace)
            .and_then(|r| r.parse::<f64>().ok())
            .ok_or_else(|| format!("MD-Workbench's {name} line has no rate: {line}"))?;
        let errors: u64 = after(line, "(", |c| c == ' ').and_then(|e| e.parse().ok()).unwrap_or(0);
        if errors > 0 {
            out.problems.push(format!("MD-Workbench counted {errors} errors in a {name} phase"));
        }
        let medians = ["read", "stat", "create", "delete"].into_iter().filter_map(|op| {
            let values = after(line, &format!(" {op}("), |c| c == ')')?;
            let median = values.split(", ").nth(2)?.trim_end_matches('s').parse().ok()?;
            Some((op.to_string(), median))
        });
        match phases.iter_mut().find(|p| p.name == name) {
            Some(lines) => {
                lines.rates.push(rate);
                lines.medians.extend(medians);
            }
            None => phases.push(Lines { name, rates: vec![rate], medians: medians.collect() }),
        }
    }
    if phases.is_empty() {
        return Err("MD-Workbench printed no precreate, benchmark or cleanup line".into());
    }
    for lines in phases {
        let mut kinds: Vec<String> = Vec::new();
        for (kind, _) in &lines.medians {
            if !kinds.contains(kind) {
                kinds.push(kind.clone());
            }
        }
        let medians = kinds
            .into_iter()
            .map(|kind| {
                let of_kind = lines.medians.iter().filter(|(k, _)| *k == kind).map(|(_, v)| *v).collect();
                (kind, super::median(of_kind))
            })
            .collect();
        let rate = lines.rates.iter().sum::<f64>() / lines.rates.len() as f64;
        out.phases.push(Phase { name: lines.name.into(), figure: rate, medians });
    }
    out.problems.extend(problems(text));
    Ok(out)
}

/// The S3 calls IOR's S3-libs3 backend warns of at every run, whatever the server: rank 0 deletes
/// the run's bucket while mdtest's top directory object is still in it, and every rank of
/// MD-Workbench creates the bucket another rank made.
fn expected_warning(line: &str) -> bool {
    (line.contains("S3_final:") && line.contains("\"ErrorBucketNotEmpty\""))
        || (line.contains("S3_init:") && line.contains("\"ErrorBucketAlreadyOwnedByYou\""))
}

/// The lines of a run that say something went wrong: a read or write check's errors, a failed
/// S3 call (`WARNING: S3 FUNCTION:LINE (path:...) "STATUS": message`), an object or file a
/// phase could not create, stat, read or remove, an MPI abort.
pub fn problems(text: &str) -> Vec<String> {
    let markers = ["Incorrect data", "ERROR", "WARNING: S3 ", "unable to ", "Unable to ", "Error while", "MPI_ABORT"];
    let mut found: Vec<(String, usize)> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| markers.iter().any(|m| l.contains(m)) && !expected_warning(l)) {
        let key = summarize(line);
        match found.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => found.push((key, 1)),
        }
    }
    found.into_iter().map(|(line, n)| if n > 1 { format!("{line} (x{n})") } else { line }).collect()
}

/// A problem line without what differs between its repetitions: a failed S3 call becomes
/// `FUNCTION "STATUS"`, other lines lose their digits.
fn summarize(line: &str) -> String {
    if let Some(call) = after(line, "WARNING: S3 ", |c| c == ':') {
        let status = after(line, "\"", |c| c == '"').unwrap_or("?");
        return format!("{call} \"{status}\"");
    }
    let line = line.trim_start_matches("WARNING: ");
    let line = line.split(" (path:").next().unwrap_or(line);
    let mut text: String = line.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
    while text.contains("##") {
        text = text.replace("##", "#");
    }
    text.chars().take(160).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Output captured from IOR 4.1 (hpc/ior master) built with S3-libs3 against libs3 4.1,
    /// 2 ranks (tests/data/hpc-tools/README.md).
    fn captured(name: &str) -> String {
        let path = format!("{}/tests/data/hpc-tools/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn figures(out: &ToolOutput) -> Vec<(&str, f64)> {
        out.phases.iter().map(|p| (p.name.as_str(), p.figure)).collect()
    }

    /// Every captured run, through every door (POSIX, HTTP, and the libs3.so.4 drop-in in-process
    /// and over the socket), parses with its four or six phases and no problem.
    #[test]
    fn every_captured_run_is_clean() {
        for door in ["posix", "http", "embedded", "local"] {
            for (file, parse, phases) in [
                ("ior-easy", parse_ior as fn(&str) -> Result<ToolOutput, String>, 2),
                ("ior-hard", parse_ior, 2),
                ("mdtest", parse_mdtest, 4),
                ("md-workbench", parse_md_workbench, 3),
            ] {
                let name = format!("{door}-{file}.txt");
                let out = parse(&captured(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(out.phases.len(), phases, "{name}: {out:?}");
                assert!(out.phases.iter().all(|p| p.figure > 0.0), "{name}: {out:?}");
                assert_eq!(out.problems, Vec::<String>::new(), "{name}");
                assert_eq!(out.version.as_deref(), Some("4.1.0+dev"), "{name}");
            }
        }
    }

    #[test]
    fn ior_summary_tables() {
        let http = parse_ior(&captured("http-ior-easy.txt")).expect("parses");
        assert_eq!(http.version.as_deref(), Some("4.1.0+dev"));
        assert_eq!(figures(&http), [("write", 248.00), ("read", 1828.98)]);
        // The S3 backend's stat of a file is its first transfer: IOR warns of the size, no problem.
        assert_eq!(http.problems, Vec::<String>::new());
        let posix = parse_ior(&captured("posix-ior-hard.txt")).expect("parses");
        assert_eq!(figures(&posix), [("write", 771.68), ("read", 8498.62)]);
        let cut = captured("posix-ior-hard.txt");
        let cut = &cut[..cut.find("Summary of all tests").expect("a summary")];
        assert!(parse_ior(cut).unwrap_err().contains("no \"Summary of all tests\""));
        let bad = "Summary of all tests:\nOperation Max(MiB) Mean(MiB)\nwrite 1.0 x\n";
        assert!(parse_ior(bad).unwrap_err().contains("no number"));
        let no_columns = "Summary of all tests:\nOperation Max(MiB)\nwrite 1.0\n";
        assert!(parse_ior(no_columns).unwrap_err().contains("Mean(MiB)"));
    }

    #[test]
    fn ior_read_check_errors_are_problems() {
        let text = captured("http-ior-easy.txt").replace(
            "Summary of all tests:",
            "WARNING: Incorrect data on read (12 errors found).\nUsed Time Stamp 1 (0x1) for Data Signature\nSummary of all tests:",
        );
        let out = parse_ior(&text).expect("parses");
        assert_eq!(out.problems, ["Incorrect data on read (# errors found)."]);
    }

    #[test]
    fn mdtest_summary_rate_tables() {
        let http = parse_mdtest(&captured("http-mdtest.txt")).expect("parses");
        assert_eq!(http.version.as_deref(), Some("4.1.0+dev"));
        assert_eq!(figures(&http), [("write", 710.802), ("stat", 10457.316), ("read", 5007.335), ("delete", 1391.544)]);
        // mdtest leaves its top directory's object in the bucket on every S3 server: expected.
        assert_eq!(http.problems, Vec::<String>::new());
        let posix = parse_mdtest(&captured("posix-mdtest.txt")).expect("parses");
        assert_eq!(figures(&posix)[1], ("stat", 914190.061));
        assert!(parse_mdtest("-- started --\nno table\n").is_err());
    }

    #[test]
    fn mdtest_failed_calls_are_counted_once_per_kind() {
        let text = captured("http-mdtest.txt").replace(
            "SUMMARY rate",
            "WARNING: S3 S3_Create:241 (path:runmdtest_a) \"ErrorAccessDenied\": denied \n\
             WARNING: S3 S3_Create:241 (path:runmdtest_b) \"ErrorAccessDenied\": denied \n\
             WARNING: unable to stat file run/mdtest/file.mdtest.0.1\nSUMMARY rate",
        );
        let out = parse_mdtest(&text).expect("parses");
        assert_eq!(
            out.problems,
            ["S3_Create \"ErrorAccessDenied\" (x2)", "unable to stat file run/mdtest/file.mdtest.#.#"]
        );
    }

    #[test]
    fn md_workbench_phase_lines() {
        let http = parse_md_workbench(&captured("http-md-workbench.txt")).expect("parses");
        assert_eq!(http.version.as_deref(), Some("4.1.0+dev"));
        let rates = figures(&http);
        assert_eq!(rates[0], ("precreate", 478.5));
        assert_eq!(rates[1].0, "benchmark");
        assert!((rates[1].1 - (1366.2 + 1321.6 + 596.4) / 3.0).abs() < 1e-9, "{rates:?}");
        assert_eq!(rates[2], ("cleanup", 666.8));
        let kinds: Vec<&str> = http.phases[1].medians.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(kinds, ["read", "stat", "create", "delete"]);
        assert_eq!(http.phases[1].medians[0].1, 3.7146e-04);
        // Both ranks create the bucket and rank 0 deletes it before the cleanup: expected.
        assert_eq!(http.problems, Vec::<String>::new());
        let posix = parse_md_workbench(&captured("posix-md-workbench.txt")).expect("parses");
        assert_eq!(figures(&posix)[0], ("precreate", 4227.0));
        let failed = captured("posix-md-workbench.txt").replacen("(0 errs)", "(7 errs)", 1);
        let out = parse_md_workbench(&failed).expect("parses");
        assert_eq!(out.problems, ["MD-Workbench counted 7 errors in a precreate phase"]);
        assert!(parse_md_workbench("Args: md-workbench\n").is_err());
    }
}
