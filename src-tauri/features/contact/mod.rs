//! First contacts beyond the send: the receipt endpoints the providers post to ([`receipts`]), the speed of
//! first contacts ([`speed`]) and a person's answer to a message in doubt ([`doubt`]). The sending itself is the `whatsapp` and `sms` connectors'
//! (`features::targets::contact`).

pub mod doubt;
pub mod receipts;
pub mod speed;
