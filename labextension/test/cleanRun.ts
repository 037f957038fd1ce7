export {};

// A clean run prints no React warning: one (a state update outside act(...), a missing key, an unknown
// prop) fails the test it was printed in, or the next one when it arrived after its test ended.
const printed: string[] = [];
const printError = console.error.bind(console);

console.error = (...args: unknown[]): void => {
  const text = args.map(String).join(' ');
  if (text.startsWith('Warning:')) {
    printed.push(text.split('\n')[0]);
  }
  printError(...args);
};

afterEach(() => {
  const warnings = printed.splice(0);
  if (warnings.length) {
    throw new Error(`React warned while this test ran: ${warnings.join('; ')}`);
  }
});
