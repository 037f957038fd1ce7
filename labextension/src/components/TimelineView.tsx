/**
 * The Timeline tab: every session's calls on a time axis, one lane per session, delegated
 * helper and automation run (a helper's lane links to the call that started it), with a
 * scrubber that shows the log as it stood at that moment (its keys step from call to call), filters by
 * session (each named by whom it worked for and when it began, not its id), tool and
 * decision, each call's preview, decision, approver, result and duration on selection,
 * **Replay** (each preview made again, a dry run: nothing runs) and **Export** (the session's
 * bug bundle, every secret removed by the server). Every text from the log goes through
 * `safe.tsx`.
 */
import { ServerConnection } from '@jupyterlab/services';
import * as React from 'react';

import { formatClock, formatMilliseconds } from '../format';
import { saveBlob, visibleText } from '../safe';
import {
  axisPercent,
  callMs,
  callsSoFar,
  IReplayLine,
  ITimeline,
  ITimelineCall,
  ITimelineFilters,
  ITimelineLane,
  NO_FILTERS,
  replayCounts,
  REPLAY_WORDS,
  resultWords,
  scrubberStep,
  sessionName,
  timeRange,
  TimelineAPI
} from '../timeline';
import { PreviewView } from './Preview';

/** What the view asks of the server (a `TimelineAPI`, or a fake in a test). */
export interface ITimelineSource {
  timeline(filters: ITimelineFilters): Promise<ITimeline>;
  replay(filters: ITimelineFilters): Promise<{ replay: IReplayLine[] }>;
  bundle(session: string): Promise<Blob>;
}

/** Props of {@link TimelineView}. */
export interface ITimelineViewProps {
  source: ITimelineSource;
  /** Read the log when the tab is shown. */
  visible: boolean;
  /** Hand a downloaded bundle to the browser (default: a link with `download`, clicked). */
  save?: (blob: Blob, name: string) => void;
}

const LANE_KINDS: Record<ITimelineLane['kind'], string> = {
  session: 'session',
  helper: 'helper',
  automation: 'automation'
};

/** The Timeline tab on the page's Jupyter server (`settings`). */
export function TimelineTab(props: {
  settings: ServerConnection.ISettings;
  visible: boolean;
}): JSX.Element {
  const source = React.useMemo(() => new TimelineAPI(props.settings), [props.settings]);
  return <TimelineView source={source} visible={props.visible} />;
}

/** The action log as a timeline. */
export function TimelineView({
  source,
  visible,
  save = saveBlob
}: ITimelineViewProps): JSX.Element {
  const [filters, setFilters] = React.useState<ITimelineFilters>(NO_FILTERS);
  const [data, setData] = React.useState<ITimeline | null>(null);
  const [at, setAt] = React.useState<number | null>(null); // ms; null: the end, following new calls
  const [selected, setSelected] = React.useState<string | null>(null);
  const [replayed, setReplayed] = React.useState<IReplayLine[] | null>(null);
  const [busy, setBusy] = React.useState<'' | 'loading' | 'replay' | 'export'>('');
  const [error, setError] = React.useState('');
  const [exported, setExported] = React.useState('');

  const load = React.useCallback(
    async (wanted: ITimelineFilters) => {
      setBusy('loading');
      try {
        setData(await source.timeline(wanted));
        setError('');
      } catch (reason) {
        setError(messageOf(reason));
      } finally {
        setBusy('');
      }
    },
    [source]
  );

  React.useEffect(() => {
    if (visible) {
      void load(filters);
    }
  }, [visible, filters, load]);

  const calls = data?.calls ?? [];
  // Each session's name, from the first calls of it seen (a session filter leaves only its own).
  const names = React.useRef(new Map<string, string>());
  for (const session of data?.sessions ?? []) {
    if (!names.current.has(session) && calls.some(call => call.session_id === session)) {
      names.current.set(session, sessionName(session, calls, clock));
    }
  }
  const nameOf = (session: string) =>
    names.current.get(session) ?? sessionName(session, calls, clock);
  const [start, end] = timeRange(calls);
  const now = at === null ? end : Math.min(Math.max(at, start), end);
  const shown = callsSoFar(calls, now);
  const chosen = shown.find(call => call.call_id === selected) ?? null;
  const replayOf = new Map((replayed ?? []).map(line => [line.call_id, line]));

  const setFilter = (name: keyof ITimelineFilters, value: string) => {
    setFilters(current => ({ ...current, [name]: value }));
    setReplayed(null);
    setAt(null);
  };

  const replay = async () => {
    setBusy('replay');
    try {
      setReplayed((await source.replay(filters)).replay);
      setError('');
    } catch (reason) {
      setError(messageOf(reason));
    } finally {
      setBusy('');
    }
  };

  const exportBundle = async () => {
    setBusy('export');
    try {
      const name = `betty-bundle-${filters.session}.zip`;
      save(await source.bundle(filters.session), name);
      setExported(name);
      setError('');
    } catch (reason) {
      setError(messageOf(reason));
    } finally {
      setBusy('');
    }
  };

  return (
    <div className="betty-Timeline" data-testid="betty-timeline">
      <div className="betty-Timeline-filters">
        <Choice
          label="Session"
          value={filters.session}
          choices={data?.sessions ?? []}
          labelOf={nameOf}
          testId="betty-timeline-session"
          onChange={value => setFilter('session', value)}
        />
        <Choice
          label="Tool"
          value={filters.tool}
          choices={data?.tools ?? []}
          testId="betty-timeline-tool"
          onChange={value => setFilter('tool', value)}
        />
        <Choice
          label="Decision"
          value={filters.decision}
          choices={data?.decisions ?? []}
          testId="betty-timeline-decision"
          onChange={value => setFilter('decision', value)}
        />
      </div>
      <div className="betty-Timeline-actions">
        <button
          className="betty-Button"
          data-testid="betty-timeline-refresh"
          disabled={busy !== ''}
          onClick={() => void load(filters)}
        >
          Refresh
        </button>
        <button
          className="betty-Button"
          data-testid="betty-timeline-replay"
          disabled={busy !== '' || !calls.length}
          title="Make each shown call's preview again with today's tools and policy; nothing runs"
          onClick={() => void replay()}
        >
          {busy === 'replay' ? 'Replaying…' : 'Replay (previews only)'}
        </button>
        <button
          className="betty-Button"
          data-testid="betty-timeline-export"
          disabled={busy !== '' || !filters.session}
          title={
            filters.session
              ? 'Download this session’s events, action-log lines and configuration, secrets removed'
              : 'Choose a session to export its bug bundle'
          }
          onClick={() => void exportBundle()}
        >
          Export bug bundle
        </button>
      </div>
      {error && (
        <div className="betty-Timeline-error" role="alert" data-testid="betty-timeline-error">
          {visibleText(error)}
        </div>
      )}
      {exported && (
        <div className="betty-Timeline-note" data-testid="betty-timeline-exported">
          Saved {visibleText(exported)}: its events, action-log lines and configuration, every
          secret removed.
        </div>
      )}
      {data && calls.length === 0 && (
        <div className="betty-Timeline-empty" data-testid="betty-timeline-empty">
          No calls match: nothing is in the action log for these filters yet.
        </div>
      )}
      {calls.length > 0 && (
        <>
          <label className="betty-Timeline-scrubber">
            <span data-testid="betty-timeline-at">
              At {clock(now / 1000)}: {shown.length} of {calls.length} call
              {calls.length === 1 ? '' : 's'}
            </span>
            <input
              type="range"
              min={start}
              max={end}
              step={1}
              value={now}
              aria-label="Time on the timeline"
              aria-valuetext={`${clock(now / 1000)}: ${shown.length} of ${calls.length} calls`}
              title="Arrow keys: the next or previous call; Page Up/Down: ten calls; Home/End: first and last"
              data-testid="betty-timeline-scrubber"
              onChange={event => setAt(Number(event.target.value))}
              onKeyDown={event => {
                const to = scrubberStep(calls, now, event.key);
                if (to !== null) {
                  event.preventDefault();
                  setAt(to);
                }
              }}
            />
          </label>
          <div className="betty-Timeline-lanes">
            {(data?.lanes ?? []).map(lane => (
              <Lane
                key={lane.id}
                lane={lane}
                name={lane.kind === 'session' ? nameOf(lane.session_id) : lane.title}
                calls={shown.filter(call => call.lane === lane.id)}
                start={start}
                end={end}
                selected={selected}
                replayOf={replayOf}
                onSelect={setSelected}
                starter={calls.find(call => call.call_id === lane.started_by) ?? null}
              />
            ))}
          </div>
          {replayed && <ReplaySummary lines={replayed} />}
          <ol className="betty-Timeline-calls" data-testid="betty-timeline-calls">
            {shown.map(call => (
              <li key={`${call.session_id}/${call.call_id}/${call.ts}`}>
                <button
                  className={`betty-Timeline-call${call.call_id === selected ? ' betty-mod-selected' : ''}`}
                  data-testid="betty-timeline-call"
                  onClick={() => setSelected(call.call_id)}
                >
                  <span className="betty-Timeline-time">{clock(call.ts)}</span>
                  <span className="betty-Timeline-tool">
                    <ToolName name={call.tool} />
                    {call.task && (
                      <span className="betty-Timeline-task"> · for {visibleText(call.task)}</span>
                    )}
                  </span>
                  <span
                    className={`betty-Timeline-decision betty-mod-${decisionClass(call.decision)}`}
                  >
                    {visibleText(call.decision)}
                  </span>
                  {replayOf.has(call.call_id) && (
                    <span
                      className="betty-Timeline-replayed"
                      data-testid="betty-timeline-replay-status"
                    >
                      {replayOf.get(call.call_id)!.status}
                    </span>
                  )}
                </button>
              </li>
            ))}
          </ol>
          {chosen && <CallDetails call={chosen} replayed={replayOf.get(chosen.call_id) ?? null} />}
        </>
      )}
    </div>
  );
}

function Choice(props: {
  label: string;
  value: string;
  choices: string[];
  /** How a choice reads (default: as it is). */
  labelOf?: (choice: string) => string;
  testId: string;
  onChange: (value: string) => void;
}): JSX.Element {
  return (
    <label className="betty-Timeline-filter">
      {props.label}
      <select
        value={props.value}
        data-testid={props.testId}
        onChange={event => props.onChange(event.target.value)}
      >
        <option value="">any</option>
        {props.choices.map(choice => (
          <option key={choice} value={choice} title={visibleText(choice)}>
            {visibleText(props.labelOf ? props.labelOf(choice) : choice)}
          </option>
        ))}
      </select>
    </label>
  );
}

function Lane(props: {
  lane: ITimelineLane;
  /** The lane's name as a person knows it (a session's: whom it worked for, and when it began). */
  name: string;
  calls: ITimelineCall[];
  start: number;
  end: number;
  selected: string | null;
  replayOf: Map<string, IReplayLine>;
  starter: ITimelineCall | null;
  onSelect: (callId: string) => void;
}): JSX.Element {
  const { lane, starter } = props;
  return (
    <div
      className={`betty-Timeline-lane betty-mod-${lane.kind}`}
      data-testid="betty-timeline-lane"
      data-kind={lane.kind}
    >
      <div className="betty-Timeline-laneLabel">
        <span className="betty-Timeline-laneKind">{LANE_KINDS[lane.kind]}</span>{' '}
        <span
          className="betty-Timeline-laneTitle"
          data-testid="betty-timeline-lane-title"
          title={visibleText(lane.session_id)}
        >
          {visibleText(props.name)}
        </span>
        {lane.trigger && (
          <span className="betty-Timeline-trigger"> · fired by {visibleText(lane.trigger)}</span>
        )}
        {lane.started_by && (
          <button
            className="betty-Timeline-link"
            data-testid="betty-timeline-started-by"
            title="Select the call that started it"
            onClick={() => props.onSelect(lane.started_by!)}
          >
            ← started by {starter ? visibleText(starter.tool) : 'call'}{' '}
            {visibleText(lane.started_by)}
          </button>
        )}
      </div>
      <div className="betty-Timeline-track">
        {props.calls.map(call => (
          <button
            key={`${call.call_id}/${call.ts}`}
            data-testid="betty-timeline-dot"
            className={`betty-Timeline-dot betty-mod-${decisionClass(call.decision)}${
              call.call_id === props.selected ? ' betty-mod-selected' : ''
            }`}
            style={{ left: `${axisPercent(callMs(call), props.start, props.end)}%` }}
            title={`${visibleText(call.tool)}: ${visibleText(call.decision)}`}
            aria-label={`${visibleText(call.tool)} at ${clock(call.ts)}`}
            onClick={() => props.onSelect(call.call_id)}
          />
        ))}
      </div>
    </div>
  );
}

function ReplaySummary({ lines }: { lines: IReplayLine[] }): JSX.Element {
  return (
    <div className="betty-Timeline-replay" data-testid="betty-timeline-replay-summary">
      Replay, a dry run (previews only, nothing ran): {lines.length} preview
      {lines.length === 1 ? '' : 's'} —{' '}
      {replayCounts(lines)
        .map(([status, count]) => `${count} ${REPLAY_WORDS[status] ?? status}`)
        .join(', ')}
    </div>
  );
}

function CallDetails({
  call,
  replayed
}: {
  call: ITimelineCall;
  replayed: IReplayLine | null;
}): JSX.Element {
  return (
    <div className="betty-Timeline-details" data-testid="betty-timeline-details">
      <dl>
        <dt>Time</dt>
        <dd>{clock(call.ts)}</dd>
        <dt>Tool</dt>
        <dd data-testid="betty-timeline-detail-tool">
          <ToolName name={call.tool} />
        </dd>
        <dt>Decision</dt>
        <dd data-testid="betty-timeline-detail-decision">{visibleText(call.decision)}</dd>
        <dt>Approver</dt>
        <dd data-testid="betty-timeline-detail-approver">
          {call.approver ? visibleText(call.approver) : '—'}
        </dd>
        <dt>Result</dt>
        <dd data-testid="betty-timeline-detail-result">
          {resultWords(call)}
          {call.summary ? `: ${visibleText(call.summary)}` : ''}
        </dd>
        <dt>Duration</dt>
        <dd>{formatMilliseconds(call.duration_ms)}</dd>
        {call.task && (
          <>
            <dt>For</dt>
            <dd>{visibleText(call.task)}</dd>
          </>
        )}
      </dl>
      {call.preview ? (
        <PreviewView preview={call.preview} />
      ) : (
        <div className="betty-Timeline-note">No preview was recorded.</div>
      )}
      {replayed && (
        <div className="betty-Timeline-replayed-detail" data-testid="betty-timeline-replay-detail">
          <div>
            Replayed (nothing ran):{' '}
            <strong>{REPLAY_WORDS[replayed.status] ?? replayed.status}</strong>
          </div>
          {replayed.diff && <pre className="betty-Timeline-diff">{visibleText(replayed.diff)}</pre>}
          {replayed.status !== 'same' && replayed.current && (
            <PreviewView preview={replayed.current} />
          )}
        </div>
      )}
    </div>
  );
}

/** A tool's name, which may break onto the next line after an underscore, never inside a word. */
function ToolName(props: { name: string }): JSX.Element {
  const parts = visibleText(props.name).split('_');
  return (
    <span className="betty-Timeline-toolName">
      {parts.map((part, i) => (
        <React.Fragment key={i}>
          {part}
          {i < parts.length - 1 && (
            <>
              _<wbr />
            </>
          )}
        </React.Fragment>
      ))}
    </span>
  );
}

/** A call's time of day, to the second. */
function clock(ts: number): string {
  return formatClock(new Date(ts * 1000));
}

function decisionClass(decision: string): string {
  return /^[a-z_]+$/.test(decision) ? decision : 'other';
}

function messageOf(reason: unknown): string {
  return reason instanceof Error ? reason.message : String(reason);
}
