/**
 * A link that opens one of an experiment's files (its notebook, its wiki page) in JupyterLab,
 * as the Jobs and Experiments tabs offer them.
 */
import * as React from 'react';

/** Props of {@link OpenLink}. */
export interface IOpenLinkProps {
  /** The file, relative to JupyterLab's root; shown as the link's tooltip. */
  path: string;
  /** The link's `data-testid`. */
  testId: string;
  onOpen: (path: string) => void;
  children: React.ReactNode;
}

/** A button drawn as a link that opens `path`. */
export function OpenLink({ path, testId, onOpen, children }: IOpenLinkProps): JSX.Element {
  return (
    <button className="betty-Link" data-testid={testId} title={path} onClick={() => onOpen(path)}>
      {children}
    </button>
  );
}
