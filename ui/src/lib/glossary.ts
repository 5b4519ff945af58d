// The words Leadline uses, in one place: the Words page shows them, and docs/operators.md carries the same list
// (glossary.test.ts checks that the two agree word for word).

export interface Word {
  term: string;
  meaning: string;
}

export const GLOSSARY: Word[] = [
  { term: 'Lead', meaning: 'One person’s enquiry, as a source sent it: a web form, a Meta lead form, a partner’s system.' },
  { term: 'Source', meaning: 'Where leads come from. Leadline knows how many each source usually sends at this hour of the week.' },
  { term: 'Target', meaning: 'Where leads go: the CRM, or a further step such as a welcome SMS or a call task.' },
  {
    term: 'Step',
    meaning: 'Delivering one lead to one target. A lead’s route has one step per target, in order: the CRM record first, then the SMS.',
  },
  { term: 'Delivered', meaning: 'The target confirmed the step. For a CRM, the record exists.' },
  {
    term: 'Waiting',
    meaning: 'A step not delivered yet: due now, being sent, waiting for its next try, or for an earlier step. A waiting lead is safe on disk.',
  },
  {
    term: 'Dead letter',
    meaning: 'A step Leadline stopped trying, because trying again cannot help (the CRM refused the data or the setup) or its time ran out. Parked, not lost: a person replays, fixes or resolves it.',
  },
  {
    term: 'Cause',
    meaning: 'Why dead letters failed, with what belongs to one lead (a phone number, an email) masked, so that leads with the same problem form one group.',
  },
  { term: 'Replay', meaning: 'Sending dead letters again through normal delivery, with fresh attempts, once their cause is dealt with.' },
  { term: 'Canary', meaning: 'The first few leads of a replay. The rest follow only if all of them are delivered.' },
  { term: 'Fixed', meaning: 'A person corrected the lead’s data before it went again. What was received stays in the lead’s history.' },
  {
    term: 'Paused by the breaker',
    meaning: 'Leadline stopped sending to a target by itself because it looks down. It tries one lead now and then and goes on by itself when the target answers.',
  },
  { term: 'Paused by a person', meaning: 'Someone pressed Pause on the Targets page. Nothing is sent to that target until someone presses Resume.' },
  { term: 'Rate-limited', meaning: 'The target asked Leadline to slow down. Leadline waits exactly as long as asked. This is not a failure.' },
  {
    term: 'Silent source',
    meaning: 'A source that sent nothing for a while although leads were expected at this hour: often a broken form or integration, nothing Leadline can see otherwise.',
  },
  { term: 'Alert', meaning: 'One per incident, not one per lead. It resolves by itself when its cause clears; acknowledging it tells the team someone is on it.' },
];
