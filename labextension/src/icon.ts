import { LabIcon } from '@jupyterlab/ui-components';

import { ICON_NAME } from './constants';

/**
 * A small GPU card: the board with a fan and a heat sink, the bracket on the left, the connector pins below.
 * Its shapes carry `jp-icon3`, so the theme colours them like JupyterLab's own sidebar icons.
 */
const GPU_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path fill-rule="evenodd" d="M1 4h2v1h18a2 2 0 0 1 2 2v9a2 2 0 0 1-2 2h-2v2h-7v-2H5v3H3V6H1V4zm4 3v9h16V7H5z"/>
    <path fill-rule="evenodd" d="M10 8a3.5 3.5 0 1 1 0 7 3.5 3.5 0 0 1 0-7zm0 2a1.5 1.5 0 1 0 0 3 1.5 1.5 0 0 0 0-3z"/>
    <rect x="15" y="8.5" width="1.5" height="6"/>
    <rect x="17.5" y="8.5" width="1.5" height="6"/>
  </g>
</svg>`;

export const gpuIcon = new LabIcon({ name: ICON_NAME, svgstr: GPU_SVG });
