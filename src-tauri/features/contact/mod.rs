//! First contacts beyond the send: the receipt endpoints the providers post to ([`receipts`]) and the speed of
//! first contacts ([`speed`]). The sending itself is the `whatsapp` and `sms` connectors'
//! (`features::targets::contact`).

pub mod receipts;
pub mod speed;
