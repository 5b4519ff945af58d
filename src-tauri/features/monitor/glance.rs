//! The state at a glance: what the tray icon shows while the window is hidden. Three levels a person can tell
//! apart by colour — every lead delivered (green), leads on their way or slowed (amber), something only a person
//! can settle (red) — and the counts in words. Pure: computed from the same [`HealthView`] the Overview shows, so
//! the tray and the window never disagree.

use super::health::{HealthView, VerdictLevel};

/// The tray's three states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlanceLevel {
    /// Nothing waiting, nothing dead-lettered, nothing wrong.
    AllDelivered,
    /// Leads on their way (waiting, sending, retrying, rate-limited): Leadline copes by itself.
    Waiting,
    /// Open dead letters, or something the verdict says only a person can fix.
    NeedsPerson,
}

impl GlanceLevel {
    /// A short name, for logs and tests.
    pub fn as_str(self) -> &'static str {
        match self {
            GlanceLevel::AllDelivered => "all_delivered",
            GlanceLevel::Waiting => "waiting",
            GlanceLevel::NeedsPerson => "needs_person",
        }
    }

    /// The icon's colour (RGB): the Overview's green, amber and red.
    pub fn colour(self) -> [u8; 3] {
        match self {
            GlanceLevel::AllDelivered => [21, 128, 61],
            GlanceLevel::Waiting => [217, 119, 6],
            GlanceLevel::NeedsPerson => [220, 38, 38],
        }
    }
}

/// What the tray shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glance {
    pub level: GlanceLevel,
    /// One line: the level in words with its counts ("Needs a person: 2 dead letters").
    pub headline: String,
    /// The verdict's reason, when it adds something to the headline.
    pub detail: Option<String>,
}

impl Glance {
    /// Headline and detail on separate lines: the tooltip.
    pub fn tooltip(&self) -> String {
        match &self.detail {
            Some(d) => format!("Leadline — {}\n{d}", self.headline),
            None => format!("Leadline — {}", self.headline),
        }
    }
}

fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The state at a glance. Open dead letters always need a person (someone must replay, fix or discard them);
/// otherwise the verdict decides, and leads still on their way make it "waiting".
pub fn glance(health: &HealthView) -> Glance {
    let o = &health.queue.overall;
    let on_the_way = o.pending + o.running + o.waiting;
    let mut counts = Vec::new();
    if o.dead_open > 0 {
        counts.push(plural(o.dead_open, "dead letter", "dead letters"));
    }
    if o.running > 0 {
        counts.push(format!("{} sending", o.running));
    }
    if o.pending + o.waiting > 0 {
        counts.push(format!("{} waiting", o.pending + o.waiting));
    }
    let counts = counts.join(", ");
    let verdict = &health.verdict;
    let level = if o.dead_open > 0 || verdict.level == VerdictLevel::NeedsPerson {
        GlanceLevel::NeedsPerson
    } else if on_the_way > 0 || verdict.level == VerdictLevel::Degraded {
        GlanceLevel::Waiting
    } else {
        GlanceLevel::AllDelivered
    };
    let headline = match (level, counts.is_empty()) {
        (GlanceLevel::AllDelivered, _) => "all delivered".to_string(),
        (GlanceLevel::Waiting, true) => "slowed".to_string(),
        (GlanceLevel::Waiting, false) => counts,
        (GlanceLevel::NeedsPerson, true) => "needs a person".to_string(),
        (GlanceLevel::NeedsPerson, false) => format!("needs a person: {counts}"),
    };
    // "every lead is delivered" / "3 leads on the way" only repeat the headline.
    let detail = (verdict.level != VerdictLevel::AllWell).then(|| verdict.reason.clone());
    Glance { level, headline, detail }
}

/// What *Quit* asks before Leadline stops: what is being sent now (finished first, within `grace_seconds`) and
/// what waits (kept, sent at the next start), and that nothing arrives meanwhile.
pub fn quit_question(health: &HealthView, grace_seconds: u64) -> String {
    let o = &health.queue.overall;
    let waiting = o.pending + o.waiting;
    let are = |n: i64| if n == 1 { "is" } else { "are" };
    let mut lines = Vec::new();
    if o.running > 0 {
        lines.push(format!(
            "{} {} being sent right now: Leadline finishes {} before it quits (at most {grace_seconds} s).",
            plural(o.running, "lead", "leads"),
            are(o.running),
            if o.running == 1 { "it" } else { "them" }
        ));
    }
    if waiting > 0 {
        lines.push(format!(
            "{} {} waiting: {} stored safely and sent when Leadline starts again.",
            plural(waiting, "lead", "leads"),
            are(waiting),
            if waiting == 1 { "it is" } else { "they are" }
        ));
    }
    if lines.is_empty() {
        lines.push("Every lead is delivered; nothing is being sent.".into());
    }
    lines.push(
        "While Leadline is closed it delivers nothing and receives no webhooks on this computer. To keep it \
         running, close the window instead: Leadline goes on without it."
            .into(),
    );
    lines.join("\n\n")
}

/// The tray icon, `size`×`size` RGBA: a disc in the level's colour with a white mark — a tick when all is
/// delivered, three dots while leads wait, an exclamation mark when a person is needed — so the state reads
/// without colour too.
pub fn icon_rgba(level: GlanceLevel, size: u32) -> Vec<u8> {
    let s = size as f32;
    let (cx, cy, r) = (s / 2.0, s / 2.0, s / 2.0 - 0.5);
    let [red, green, blue] = level.colour();
    let mut px = vec![0u8; (size * size * 4) as usize];
    for y in 0..size {
        for x in 0..size {
            // Sample at the pixel's centre, in units of the icon's size (0..1) for the mark.
            let (fx, fy) = (x as f32 + 0.5, y as f32 + 0.5);
            let d = ((fx - cx).powi(2) + (fy - cy).powi(2)).sqrt();
            // Anti-aliased edge: full inside, fading over the last pixel.
            let alpha = (r - d + 0.5).clamp(0.0, 1.0);
            if alpha == 0.0 {
                continue;
            }
            let white = mark(level, fx / s, fy / s);
            let i = ((y * size + x) * 4) as usize;
            let (r8, g8, b8) = if white { (255, 255, 255) } else { (red, green, blue) };
            px[i..i + 4].copy_from_slice(&[r8, g8, b8, (alpha * 255.0) as u8]);
        }
    }
    px
}

/// Whether the white mark covers the point (u, v) of the unit square.
fn mark(level: GlanceLevel, u: f32, v: f32) -> bool {
    let near = |a: (f32, f32), b: (f32, f32), width: f32| {
        // Distance from (u, v) to the segment a–b.
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let t = (((u - a.0) * dx + (v - a.1) * dy) / (dx * dx + dy * dy)).clamp(0.0, 1.0);
        let (px, py) = (a.0 + t * dx, a.1 + t * dy);
        ((u - px).powi(2) + (v - py).powi(2)).sqrt() <= width
    };
    match level {
        GlanceLevel::AllDelivered => near((0.28, 0.52), (0.43, 0.67), 0.07) || near((0.43, 0.67), (0.73, 0.35), 0.07),
        GlanceLevel::Waiting => {
            [0.28, 0.5, 0.72].iter().any(|&x| ((u - x).powi(2) + (v - 0.5).powi(2)).sqrt() <= 0.085)
        }
        GlanceLevel::NeedsPerson => {
            near((0.5, 0.24), (0.5, 0.58), 0.075) || ((u - 0.5).powi(2) + (v - 0.76).powi(2)).sqrt() <= 0.08
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::monitor::health::HealthVerdict;
    use crate::store::{QueueHealth, TargetHealth};

    fn health(pending: i64, running: i64, dead_open: i64, level: VerdictLevel, reason: &str) -> HealthView {
        let overall = TargetHealth { target: "*".into(), pending, running, dead_open, ..Default::default() };
        HealthView {
            queue: QueueHealth { generated_at: "2026-12-05T13:00:00Z".parse().unwrap(), overall, targets: vec![] },
            breakers: vec![],
            verdict: HealthVerdict { level, reason: reason.into(), link: None },
        }
    }

    #[test]
    fn an_empty_queue_is_all_delivered() {
        let g = glance(&health(0, 0, 0, VerdictLevel::AllWell, "every lead is delivered"));
        assert_eq!(g.level, GlanceLevel::AllDelivered);
        assert_eq!(g.tooltip(), "Leadline — all delivered");
    }

    #[test]
    fn leads_on_their_way_are_waiting_with_their_counts() {
        let g = glance(&health(12, 3, 0, VerdictLevel::AllWell, "15 leads on the way, nothing stuck"));
        assert_eq!(g.level, GlanceLevel::Waiting);
        assert_eq!(g.headline, "3 sending, 12 waiting");
        assert_eq!(g.detail, None);
        let slowed = glance(&health(0, 0, 0, VerdictLevel::Degraded, "crm is rate-limited until 10:42:00 UTC"));
        assert_eq!(slowed.level, GlanceLevel::Waiting);
        assert_eq!(slowed.tooltip(), "Leadline — slowed\ncrm is rate-limited until 10:42:00 UTC");
    }

    #[test]
    fn a_dead_letter_needs_a_person_even_when_the_verdict_is_calm() {
        let g = glance(&health(2, 0, 1, VerdictLevel::AllWell, "2 leads on the way, nothing stuck"));
        assert_eq!(g.level, GlanceLevel::NeedsPerson);
        assert_eq!(g.headline, "needs a person: 1 dead letter, 2 waiting");
        let down = glance(&health(40, 0, 0, VerdictLevel::NeedsPerson, "crm looks down"));
        assert_eq!(down.level, GlanceLevel::NeedsPerson);
        assert_eq!(down.tooltip(), "Leadline — needs a person: 40 waiting\ncrm looks down");
    }

    #[test]
    fn quitting_says_what_is_in_flight_and_what_waits() {
        let busy = quit_question(&health(12, 3, 0, VerdictLevel::AllWell, ""), 15);
        assert!(
            busy.starts_with(
                "3 leads are being sent right now: Leadline finishes them before it quits (at most 15 s)."
            ),
            "{busy}"
        );
        assert!(busy.contains("12 leads are waiting: they are stored safely"), "{busy}");
        let one = quit_question(&health(1, 1, 0, VerdictLevel::AllWell, ""), 15);
        assert!(one.contains("1 lead is being sent right now: Leadline finishes it"), "{one}");
        assert!(one.contains("1 lead is waiting: it is stored"), "{one}");
        let idle = quit_question(&health(0, 0, 0, VerdictLevel::AllWell, ""), 15);
        assert!(idle.starts_with("Every lead is delivered"), "{idle}");
        assert!(idle.contains("receives no webhooks"), "{idle}");
    }

    #[test]
    fn each_level_has_its_own_colour_and_mark() {
        let size = 32;
        let icons: Vec<Vec<u8>> = [GlanceLevel::AllDelivered, GlanceLevel::Waiting, GlanceLevel::NeedsPerson]
            .map(|l| icon_rgba(l, size))
            .into();
        for (icon, level) in
            icons.iter().zip([GlanceLevel::AllDelivered, GlanceLevel::Waiting, GlanceLevel::NeedsPerson])
        {
            assert_eq!(icon.len(), (size * size * 4) as usize);
            let pixel = |x: u32, y: u32| &icon[((y * size + x) * 4) as usize..((y * size + x) * 4 + 4) as usize];
            // Corners are transparent; a point on the disc away from the mark has the level's colour.
            assert_eq!(pixel(0, 0)[3], 0);
            assert_eq!(&pixel(16, 4)[..3], &level.colour()[..]);
            assert_eq!(&pixel(4, 16)[..3], &level.colour()[..]);
            assert_eq!(pixel(4, 16)[3], 255);
        }
        // The marks differ, so the state reads without colour.
        let white = |icon: &Vec<u8>| icon.chunks(4).filter(|p| p[..3] == [255, 255, 255] && p[3] > 0).count();
        let counts: Vec<usize> = icons.iter().map(white).collect();
        assert!(counts.iter().all(|&c| c > 10), "{counts:?}");
        assert_ne!(icons[0], icons[1]);
        assert_ne!(icons[1], icons[2]);
    }
}
