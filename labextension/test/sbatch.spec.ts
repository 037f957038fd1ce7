/**
 * The resource fields of a script's edit: read from its #SBATCH lines and written back.
 */
import { resourcesOf, withResource } from '../src/sbatch';

const SCRIPT = [
  '#!/bin/bash',
  '#SBATCH --job-name=train',
  '#SBATCH -p gpu',
  '#SBATCH --gres=gpu:a100:2 # two cards',
  '#SBATCH --time=1:00:00',
  '',
  '# train it',
  'srun python train.py',
  '#SBATCH --mem=999G'
].join('\n');

describe('resourcesOf', () => {
  it('reads partition, time, memory and GPUs, short options and comments included', () => {
    expect(resourcesOf(SCRIPT)).toEqual({ partition: 'gpu', time: '1:00:00', mem: '', gpus: '2' });
  });

  it('ignores #SBATCH lines after the first command, as sbatch does', () => {
    expect(resourcesOf(SCRIPT).mem).toBe('');
  });

  it.each([
    ['#SBATCH --gpus=4', '4'],
    ['#SBATCH --gpus=h100:3', '3'],
    ['#SBATCH --gres=gpu', '1'],
    ['#SBATCH --gres=tmpfs:10G', '']
  ])('%s asks for %s GPUs', (line, gpus) => {
    expect(resourcesOf(`#!/bin/bash\n${line}\nhostname`).gpus).toBe(gpus);
  });
});

describe('withResource', () => {
  it('rewrites a line in place, keeping its option, separator, type and comment', () => {
    const edited = withResource(withResource(SCRIPT, 'partition', 'cpu'), 'gpus', '1');
    expect(edited.split('\n').slice(2, 4)).toEqual(['#SBATCH -p cpu', '#SBATCH --gres=gpu:a100:1 # two cards']);
    expect(edited.split('\n').slice(4)).toEqual(SCRIPT.split('\n').slice(4));
  });

  it('adds a missing line after the last #SBATCH line, before the commands', () => {
    const lines = withResource(SCRIPT, 'mem', '16G').split('\n');
    expect(lines[5]).toBe('#SBATCH --mem=16G');
    expect(lines.slice(6)).toEqual(SCRIPT.split('\n').slice(5));
    expect(resourcesOf(lines.join('\n')).mem).toBe('16G');
  });

  it('adds after the #! line when there is no #SBATCH line, and GPUs as --gres=gpu:N', () => {
    expect(withResource('#!/bin/bash\nhostname', 'gpus', '2')).toBe('#!/bin/bash\n#SBATCH --gres=gpu:2\nhostname');
    expect(withResource('hostname', 'time', '10')).toBe('#SBATCH --time=10\nhostname');
  });

  it("removes the line for an empty value, and for '0' GPUs", () => {
    expect(resourcesOf(withResource(SCRIPT, 'time', '')).time).toBe('');
    expect(withResource(SCRIPT, 'gpus', '0')).not.toContain('--gres');
    expect(withResource(SCRIPT, 'mem', '')).toBe(SCRIPT);
  });

  it('changes nothing but the line: hostile text elsewhere is kept byte for byte', () => {
    const hostile = `${SCRIPT}\necho '<script>alert(1)</script>' \u001b[2J`;
    const edited = withResource(hostile, 'time', '5');
    expect(edited.replace('--time=5', '--time=1:00:00')).toBe(hostile);
  });
});
