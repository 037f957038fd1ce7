/**
 * The end-mail choice's arguments: asked for, or taken back out of the script where Betty put it.
 */
import { END_MAIL_LINE, withEndMail } from '../src/endMail';

describe('withEndMail', () => {
  const script = '#!/bin/bash\n#SBATCH --time=00:05:00\necho hi\n';

  it('asks for it by end_mail alone (the server adds the line)', () => {
    expect(withEndMail({ script, goal: 'g' }, true)).toEqual({ script, goal: 'g', end_mail: true });
  });

  it('takes out only the line Betty added after the #!', () => {
    const asked = { script: script.replace('\n', `\n${END_MAIL_LINE}\n`), end_mail: true };
    expect(withEndMail(asked, false)).toEqual({ script, end_mail: false });
    const own = { script: `${script}#SBATCH --mail-type=END\n`, end_mail: true };
    expect(withEndMail(own, false)).toEqual({ ...own, end_mail: false });
  });
});
