//! E-mail over SMTP (lettre): a plain-text message per announcement, subject `[Leadline] …`, with each alert's
//! title, detail and what to do (where in the desk, and the link when `monitor.public_url` is set).

use std::time::Duration;

use lettre::message::{header::ContentType, Mailbox};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::message::{place_label, severity_word, state_note, Announcement};
use crate::config::{Config, EmailChannel, SmtpTls};
use crate::store::Alert;

/// The subject: `[Leadline] <headline>` (`[Leadline] 3 alerts` for a digest).
pub fn subject(n: &Announcement) -> String {
    let headline = n.headline();
    format!("[Leadline] {}", headline.strip_prefix("Leadline: ").unwrap_or(&headline))
}

fn what_to_do(n: &Announcement, a: &Alert) -> String {
    match n.link(a) {
        Some(url) => format!("What to do: {} — {url}", place_label(&a.place)),
        None => format!("What to do: {} in Leadline's desk.", place_label(&a.place)),
    }
}

fn facts(a: &Alert) -> String {
    format!(
        "{} · {} · alert #{} · opened {} UTC",
        severity_word(a.severity),
        a.kind.as_str(),
        a.id,
        a.opened_at.format("%Y-%m-%d %H:%M")
    )
}

/// The plain-text body.
pub fn body(n: &Announcement) -> String {
    let mut out = String::new();
    match n.alerts.as_slice() {
        [a] => {
            out.push_str(&format!(
                "{}{}\n\n{}\n\n{}\n\n{}\n",
                n.headline(),
                state_note(a),
                n.detail(a),
                what_to_do(n, a),
                facts(a)
            ));
        }
        alerts => {
            out.push_str(&format!("{}\n\n", n.headline()));
            for a in alerts {
                out.push_str(&format!(
                    "* {}{}\n  {}\n  {}\n  {}\n\n",
                    a.title,
                    state_note(a),
                    n.detail(a),
                    what_to_do(n, a),
                    facts(a)
                ));
            }
        }
    }
    out.push_str(&format!(
        "\n-- \nSent by Leadline's alert channel \"{}\". Acknowledging an alert in the desk stops its reminders.\n",
        n.channel
    ));
    out
}

/// The message as it will be sent, `Date` from the injected clock.
pub fn compose(channel: &EmailChannel, n: &Announcement) -> anyhow::Result<Message> {
    let from: Mailbox = channel.from.as_deref().unwrap_or_default().parse()?;
    let mut builder = Message::builder()
        .from(from)
        .subject(subject(n))
        .date(std::time::SystemTime::from(n.sent_at))
        .header(ContentType::TEXT_PLAIN);
    for to in &channel.to {
        builder = builder.to(to.parse()?);
    }
    Ok(builder.body(body(n))?)
}

/// Sends `n` through the channel's SMTP server; the error says why without the login.
/// `timeout` bounds each step (connect, TLS, each answer).
pub async fn send(
    name: &str,
    channel: &EmailChannel,
    timeout: Duration,
    config: &Config,
    n: &Announcement,
) -> Result<(), String> {
    let key = format!("monitor.channels.{name}");
    let message = compose(channel, n).map_err(|e| format!("cannot compose the e-mail: {e}"))?;
    let host = channel.smtp_host.as_deref().unwrap_or_default();
    let builder = match channel.smtp_tls() {
        Some(SmtpTls::Tls) => AsyncSmtpTransport::<Tokio1Executor>::relay(host),
        Some(SmtpTls::StartTls) | None => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(host),
        Some(SmtpTls::None) => Ok(AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)),
    }
    .map_err(|e| format!("cannot set up TLS for {host}: {e}"))?;
    let mut builder = builder.port(channel.smtp_port()).timeout(Some(timeout));
    if let (Some(user), Some(password)) = (&channel.username_env, &channel.password_env) {
        let user = config.secret(&format!("{key}.username_env"), user).map_err(|e| e.to_string())?;
        let password = config.secret(&format!("{key}.password_env"), password).map_err(|e| e.to_string())?;
        builder = builder.credentials(Credentials::new(user, password));
    }
    let transport = builder.build();
    match transport.send(message).await {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("SMTP {host}:{}: {e}", channel.smtp_port())),
    }
}

#[cfg(test)]
mod tests {
    use super::super::message::{tests::alert, What};
    use super::*;
    use crate::store::{AlertKind, Severity};

    #[test]
    fn the_body_says_what_happened_and_what_to_do() {
        let at = "2026-03-02T10:05:00Z".parse().unwrap();
        let a = alert(5, AlertKind::Credentials, "HUBSPOT_TOKEN", Severity::Critical);
        let n = Announcement::new("mail", What::Opened, vec![(a, 0)], at, Some("https://d.example.com"));
        assert_eq!(subject(&n), "[Leadline] title 5");
        let b = body(&n);
        assert!(
            b.starts_with("title 5\n\ndetail 5 <b>&\n\nWhat to do: Open Targets — https://d.example.com/#/targets"),
            "{b}"
        );
        assert!(b.contains("Critical · credentials · alert #5"), "{b}");
    }
}
