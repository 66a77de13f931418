// The limits the server keeps, in one place for every module of the form: the form refuses
// early what the server would refuse anyway (askrich.py: FREE_TEXT_MAX, ATTACHMENT_MAX_BYTES,
// ATTACHMENTS_MAX_COUNT, ATTACHMENTS_MAX_TOTAL_BYTES).
export const TEXT_MAX = 20000;           // characters of any one free text
export const MAX_BYTES = 10 * 1024 * 1024; // one attached file
export const MAX_COUNT = 20;             // files attached to one interview
export const MAX_TOTAL_BYTES = 50 * 1024 * 1024; // all of them together
