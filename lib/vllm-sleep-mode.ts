/**
 * `--enable-sleep-mode` as vLLM's own parser reads it, in one word of a command line or inside a
 * `sh -c` script: underscores for dashes (`--enable_sleep_mode`: vLLM turns them into dashes before
 * it parses), a value after `=`, or shortened (`--enable-sleep`: vLLM's parser keeps argparse's
 * abbreviations). Shortened no further than `--enable-sleep`, the shortest that names no other of
 * vLLM's flags by its looks; `--no-enable-sleep-mode` does not count.
 */
const sleepModeWord = /(?:^|\s)--enable[-_]sleep(?:[-_](?:m(?:o(?:d(?:e)?)?)?)?)?(?=$|[\s=])/;

/** **Pure**: whether `word` turns vLLM's sleep mode on (see above). */
export function enablesSleepMode(word: string): boolean {
  return sleepModeWord.test(word);
}
